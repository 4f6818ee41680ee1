<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\DelayerException;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

final class ConnectionTest extends TestCase
{
    use HidesSecrets;

    private const PASSWORD = 'S3cret-Pa55word-for-tests';

    private static ?RedisServer $protected = null;

    public static function tearDownAfterClass(): void
    {
        self::$protected?->stop();
        self::$protected = null;
    }

    private static function protectedServer(): RedisServer
    {
        return self::$protected ??= RedisServer::start(self::PASSWORD);
    }

    public function testUnreachableRedisRaisesConnectionExceptionQuickly(): void
    {
        $port = RedisServer::freePort(); // nothing listens there
        $start = microtime(true);
        try {
            new Client(['host' => '127.0.0.1', 'port' => $port, 'timeout' => 2]);
            self::fail('expected ConnectionException');
        } catch (ConnectionException $e) {
            self::assertInstanceOf(DelayerException::class, $e);
            self::assertStringContainsString("127.0.0.1:{$port}", $e->getMessage());
            self::assertInstanceOf(\RedisException::class, $e->getPrevious());
        }
        self::assertLessThan(1.5, microtime(true) - $start);
    }

    public function testWrongPasswordRaisesConnectionExceptionWithoutThePassword(): void
    {
        $server = self::protectedServer();
        $wrong = 'wrong-Pa55word-xyz';
        foreach ([['password' => $wrong], ['username' => 'default', 'password' => $wrong]] as $credentials) {
            try {
                new Client(['host' => '127.0.0.1', 'port' => $server->port] + $credentials);
                self::fail('expected ConnectionException');
            } catch (ConnectionException $e) {
                self::assertStringContainsString('authentication failed', $e->getMessage());
                self::assertSecretHidden($e, $wrong);
                for ($x = $e; $x !== null; $x = $x->getPrevious()) {
                    self::assertStringNotContainsString(self::PASSWORD, $x->getMessage());
                }
            }
        }
    }

    /** $password is public, as in 1.x; dumping a client does not print it. */
    public function testDumpingAClientHidesThePassword(): void
    {
        $client = new Client(['host' => '127.0.0.1', 'port' => self::protectedServer()->port, 'password' => self::PASSWORD]);
        self::assertSame(self::PASSWORD, $client->password);
        ob_start();
        var_dump($client);
        $dump = (string) ob_get_clean() . print_r($client, true);
        self::assertStringContainsString('password', $dump);
        self::assertStringNotContainsString(self::PASSWORD, $dump);
    }

    public function testAMissingPasswordIsAnAuthenticationError(): void
    {
        $port = self::protectedServer()->port;
        foreach ([['password' => ''], ['password' => null], []] as $credentials) {
            try {
                // before: the constructor passed, and a push failed with
                // "Protocol error: unauthenticated multibulk length"
                $client = new Client(['host' => '127.0.0.1', 'port' => $port] + $credentials);
                $client->schedule(Message::create('x', 't'), 1);
                self::fail('expected ConnectionException');
            } catch (ConnectionException $e) {
                self::assertSame(
                    "Redis authentication failed at 127.0.0.1:{$port}: Redis requires a password and none was given"
                    . ' (NOAUTH Authentication required.)',
                    $e->getMessage()
                );
                self::assertSecretHidden($e, self::PASSWORD);
            }
        }
    }

    public function testRightPasswordWorks(): void
    {
        $server = self::protectedServer();
        foreach ([['password' => self::PASSWORD], ['username' => 'default', 'password' => self::PASSWORD]] as $i => $credentials) {
            $client = new Client(['host' => '127.0.0.1', 'port' => $server->port] + $credentials);
            self::assertTrue($client->schedule(Message::create("auth:{$i}", 't'), 100));
            self::assertTrue($client->remove("auth:{$i}"));
        }
    }

    public function testDatabaseIsSelectedAndABadOneIsRefused(): void
    {
        $server = RedisServer::shared();
        $raw = $server->connect();
        $raw->flushAll();
        $client = new Client(['host' => '127.0.0.1', 'port' => (string) $server->port, 'database' => '3']);
        $client->schedule(Message::create('db3', 't'), 10);
        $raw->select(3);
        self::assertSame(['db3'], $raw->zRange('delayer:job_pool', 0, -1));
        $raw->flushAll();

        $this->expectException(ConnectionException::class);
        $this->expectExceptionMessage('database 99');
        new Client(['port' => $server->port, 'database' => 99]);
    }

    /**
     * As in mix/delayer-client 1.x, a key the client does not read becomes a
     * property (a subclass may use it), and the 1.x properties show where
     * the client connected; the subclass's own defaults count.
     */
    public function testConfigKeysAndPropertiesAreThose1xHad(): void
    {
        $port = RedisServer::shared()->port;
        $client = new Client(['port' => (string) $port, 'persistent' => true, 'read_timeout' => 3]);
        self::assertTrue($client->persistent);
        self::assertSame(3, $client->read_timeout);
        self::assertSame(['127.0.0.1', $port, 0, ''], [$client->host, $client->port, $client->database, $client->password]);
        $sub = new class (['port' => $port]) extends Client {
            public $host = 'localhost';

            public $database = 2;

            public function driver(): \Redis
            {
                return $this->_driver;
            }
        };
        self::assertSame(['localhost', 2], [$sub->host, $sub->database]);
        $sub->driver()->set('delayer-compat-probe', 'x');
        self::assertSame('x', $sub->driver()->get('delayer-compat-probe'));
        $redis = RedisServer::shared()->connect();
        $redis->select(2);
        self::assertSame('x', $redis->get('delayer-compat-probe'), 'the subclass default database is used');
        $redis->del('delayer-compat-probe');
    }

    public function testBadOptionsRaiseConfigException(): void
    {
        foreach ([
            ['port' => 'abc'],
            ['port' => 0],
            ['database' => -1],
            ['timeout' => 0],
            ['host' => ''],
            [0 => 'not a name'],
            ['username' => 'bob'],
        ] as $config) {
            try {
                new Client($config);
                self::fail('expected ConfigException for ' . json_encode($config));
            } catch (ConfigException $e) {
                self::assertInstanceOf(DelayerException::class, $e);
                self::assertStringContainsString((string) array_key_first($config), $e->getMessage());
            }
        }
    }
}
