<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\ConfigFile;
use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

/**
 * Reaching Redis in every supported way, from delayer.conf and from the
 * constructor: TLS with a private CA, an ACL user limited to the delayer
 * keys, a unix socket; and the config errors of those settings (worded as the
 * Rust SDK's).
 */
final class ConnectionsTest extends TestCase
{
    use HidesSecrets;

    private const ACL_USER = 'delayer';

    private const ACL_PASSWORD = 'acl-pw-Secret-42';

    private static ?string $certDir = null;

    /** @var array{cert: string, key: string, ca: string}|null */
    private static ?array $certs = null;

    private static ?RedisServer $tlsServer = null;

    private static ?RedisServer $aclServer = null;

    private static ?RedisServer $socketServer = null;

    private string $dir;

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-conf-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    public static function tearDownAfterClass(): void
    {
        foreach ([self::$tlsServer, self::$aclServer, self::$socketServer] as $server) {
            $server?->stop();
        }
        self::$tlsServer = self::$aclServer = self::$socketServer = null;
        if (self::$certDir !== null) {
            foreach (glob(self::$certDir . '/*') ?: [] as $file) {
                @unlink($file);
            }
            @rmdir(self::$certDir);
            self::$certDir = null;
            self::$certs = null;
        }
    }

    /** @return array{cert: string, key: string, ca: string} */
    private static function certs(): array
    {
        if (self::$certs === null) {
            self::$certDir = sys_get_temp_dir() . '/delayer-php-certs-' . bin2hex(random_bytes(6));
            mkdir(self::$certDir, 0700);
            self::$certs = RedisServer::makeCertificates(self::$certDir);
        }
        return self::$certs;
    }

    private static function tlsServer(): RedisServer
    {
        return self::$tlsServer ??= RedisServer::start(null, 10.0, [], self::certs());
    }

    private static function aclServer(): RedisServer
    {
        return self::$aclServer ??= RedisServer::start(null, 10.0, [
            '--user', 'default', 'off',
            '--user', self::ACL_USER, 'on', '>' . self::ACL_PASSWORD, '~delayer:*', '+@all', '-@admin', '-@dangerous',
        ]);
    }

    private static function socketServer(): RedisServer
    {
        return self::$socketServer ??= RedisServer::start(null, 10.0, [], null, true);
    }

    private function writeConfig(string $text): string
    {
        $path = $this->dir . '/delayer.conf';
        file_put_contents($path, $text);
        return $path;
    }

    /** Pushes through the client, makes the job due with the real move.lua on $raw, pops it. */
    private static function roundTrip(Client $client, \Redis $raw): void
    {
        $id = 'job-' . bin2hex(random_bytes(4));
        self::assertTrue($client->pushTo('t', $id, 0, 'via-conf'));
        $source = (string) file_get_contents(\dirname(__DIR__, 2) . '/lua/move.lua');
        $until = microtime(true) + 5.0;
        do {
            $moved = $raw->eval($source, [
                'delayer:job_pool', 'delayer:malformed', 'delayer:scheduled_count', 'delayer:topics', 'delayer:reserved',
                'delayer:job_bucket:', 'delayer:ready_queue:', '1000',
            ], 5);
            self::assertIsArray($moved, 'move.lua failed: ' . $raw->getLastError());
            if ((int) $moved[0] > 0) {
                break;
            }
            usleep(5000);
        } while (microtime(true) < $until);
        $message = $client->bPop('t', 2);
        self::assertInstanceOf(Message::class, $message);
        self::assertSame([$id, 't', 'via-conf'], [$message->id, $message->topic, $message->body]);
    }

    private static function configError(string $path): string
    {
        try {
            Client::fromConfig($path);
        } catch (ConfigException $e) {
            return $e->getMessage();
        }
        self::fail('expected ConfigException');
    }

    // ---- TLS

    public function testTlsWithAPrivateCa(): void
    {
        $server = self::tlsServer();
        $ca = self::certs()['ca'];
        copy($ca, $this->dir . '/ca.pem'); // relative to the file's directory
        $path = $this->writeConfig("[redis]\nurl = rediss://127.0.0.1:{$server->port}/0\ntls_ca_file = ca.pem\n");
        self::assertSame(['cafile' => $this->dir . '/ca.pem'], ConfigFile::load($path)['tls'] ?? null);
        $raw = $server->connect();
        self::roundTrip(Client::fromConfig($path), $raw);
        $raw->close();

        $client = new Client(['url' => "rediss://127.0.0.1:{$server->port}/0", 'tls' => ['cafile' => $ca]]);
        self::assertFalse($client->pop('t'));
    }

    public function testTlsWithoutTheCaIsAConnectionError(): void
    {
        $server = self::tlsServer();
        $path = $this->writeConfig("[redis]\nurl = rediss://127.0.0.1:{$server->port}/0\n");
        $start = microtime(true);
        try {
            Client::fromConfig($path, ['timeout' => 2]);
            self::fail('expected ConnectionException');
        } catch (ConnectionException $e) {
            self::assertStringContainsString("127.0.0.1:{$server->port}", $e->getMessage());
            self::assertStringContainsString('certificate verify failed', $e->getMessage());
        }
        self::assertLessThan(5.0, microtime(true) - $start);
    }

    public function testClientCertificateFilesAreRead(): void
    {
        $certs = self::certs();
        $path = $this->writeConfig("[redis]\nurl = rediss://127.0.0.1:1/\ntls_cert_file = {$certs['cert']}\ntls_key_file = {$certs['key']}\n");
        self::assertSame(['url' => 'rediss://127.0.0.1:1/', 'tls' => ['local_cert' => $certs['cert'], 'local_pk' => $certs['key']]], ConfigFile::load($path));
    }

    // ---- ACL

    public function testAnAclUserLimitedToTheDelayerKeys(): void
    {
        $server = self::aclServer();
        $path = $this->writeConfig("[redis]\nport = {$server->port}\nusername = " . self::ACL_USER . "\npassword = " . self::ACL_PASSWORD . "\n");
        $raw = new \Redis();
        $raw->connect('127.0.0.1', $server->port, 2.0);
        self::assertTrue($raw->auth([self::ACL_USER, self::ACL_PASSWORD]));
        self::roundTrip(Client::fromConfig($path), $raw);

        // The user really is limited: a key outside delayer:* is refused.
        try {
            $denied = $raw->set('other:key', '1');
            self::assertFalse($denied);
            self::assertStringContainsString('NOPERM', (string) $raw->getLastError());
        } catch (\RedisException $e) {
            self::assertStringContainsString('NOPERM', $e->getMessage());
        }
        $raw->close();

        // username and password override the url's
        $client = new Client([
            'url' => "redis://nobody:wrong@127.0.0.1:{$server->port}/0",
            'username' => self::ACL_USER,
            'password' => self::ACL_PASSWORD,
        ]);
        self::assertFalse($client->remove('nothing'));
    }

    public function testAWrongAclPasswordIsAConnectionErrorWithoutThePassword(): void
    {
        $server = self::aclServer();
        $wrong = 'not-the-acl-pw-123';
        foreach (["username = delayer\n", ''] as $user) {
            $path = $this->writeConfig("[redis]\nport = {$server->port}\n{$user}password = \"{$wrong}\"\n");
            $start = microtime(true);
            try {
                Client::fromConfig($path);
                self::fail('expected ConnectionException');
            } catch (ConnectionException $e) {
                self::assertStringContainsString('authentication failed', $e->getMessage());
                self::assertSecretHidden($e, $wrong);
            }
            self::assertLessThan(3.0, microtime(true) - $start);
        }
        try {
            new Client(['url' => "redis://delayer:{$wrong}@127.0.0.1:{$server->port}/0"]);
            self::fail('expected ConnectionException');
        } catch (ConnectionException $e) {
            self::assertStringNotContainsString($wrong, (string) $e);
        }
    }

    // ---- unix socket

    public function testAUnixSocket(): void
    {
        $server = self::socketServer();
        $raw = $server->connect();
        foreach (['unix', 'redis+unix'] as $scheme) {
            $path = $this->writeConfig("[redis]\nurl = {$scheme}://{$server->socket}\n");
            self::roundTrip(Client::fromConfig($path), $raw);
        }
        $raw->select(2);
        $client = new Client(['url' => "unix://{$server->socket}?db=2"]);
        $client->pushTo('t', 'in-db-2', 100);
        self::assertSame(['in-db-2'], $raw->zRange('delayer:job_pool', 0, -1));
        $raw->flushAll();
        $raw->close();
    }

    // ---- config errors

    public function testUrlWithHostPortOrDatabaseIsAConfigError(): void
    {
        $path = $this->writeConfig("[redis]\nurl = redis://:pw-in-url@127.0.0.1:1/\nport = 6380\n");
        self::assertSame("{$path}:3: [redis] port: set either url or host/port/database, not both", self::configError($path));
        $path = $this->writeConfig("[redis]\ndatabase = 1\nurl = redis://127.0.0.1:1/\nhost = h\n");
        self::assertStringStartsWith("{$path}:4: [redis] host: ", self::configError($path));
        try {
            new Client(['url' => 'redis://127.0.0.1:1/', 'port' => 6380]);
            self::fail('expected ConfigException');
        } catch (ConfigException $e) {
            self::assertSame('option port: set either url or host/port/database, not both', $e->getMessage());
        }
    }

    /** @return array<string, array{string}> */
    public static function badUrls(): array
    {
        return [
            'http' => ['http://:pw-in-url@127.0.0.1:1/'],
            'bad port' => ['redis://127.0.0.1:99999/'],
            'no scheme' => ['127.0.0.1:6379'],
        ];
    }

    /** @dataProvider badUrls */
    public function testABadUrlIsAConfigErrorNamingUrl(string $url): void
    {
        $path = $this->writeConfig("[delayer]\n\n[redis]\nurl = {$url}\n");
        self::assertSame("{$path}:4: [redis] url: not a redis://, rediss:// or unix:// URL", self::configError($path));
        try {
            new Client(['url' => $url]);
            self::fail('expected ConfigException');
        } catch (ConfigException $e) {
            self::assertSame('option url: not a redis://, rediss:// or unix:// URL', $e->getMessage());
        }
    }

    public function testTlsFilesMustComeInPairsAndBeReadable(): void
    {
        $certs = self::certs();
        $path = $this->writeConfig("[redis]\nurl = rediss://127.0.0.1:1/\n\ntls_cert_file = {$certs['cert']}\n");
        self::assertSame("{$path}:4: [redis] tls_cert_file: needs tls_key_file too", self::configError($path));
        $path = $this->writeConfig("[redis]\ntls_key_file = {$certs['key']}\n");
        self::assertSame("{$path}:2: [redis] tls_key_file: needs tls_cert_file too", self::configError($path));
        $path = $this->writeConfig("[redis]\ntls_ca_file = missing/ca.pem ; relative to the file\n");
        self::assertStringStartsWith("{$path}:2: [redis] tls_ca_file: cannot read missing/ca.pem", self::configError($path));
        foreach ([
            [['local_cert' => $certs['cert']], 'tls.local_cert needs tls.local_pk'],
            [['cafile' => $this->dir . '/nope.pem'], 'tls.cafile: cannot read'],
            [['capath' => '/etc'], 'unknown tls option'],
        ] as [$tls, $message]) {
            try {
                new Client(['url' => 'rediss://127.0.0.1:1/', 'tls' => $tls]);
                self::fail('expected ConfigException');
            } catch (ConfigException $e) {
                self::assertStringContainsString($message, $e->getMessage());
            }
        }
    }

    public function testQuotedValuesAreUnquoted(): void
    {
        $path = $this->writeConfig(implode("\n", [
            '[redis]',
            'password = ";secret"   ; a quoted value keeps its ";"',
            "username = 'a #b'",
            'url = "unix:///tmp/r.sock"',
            'tls_ca_file =   ; only a comment: empty',
            '[delayer]',
            "key_prefix = 'q:'",
        ]));
        self::assertSame(
            ['url' => 'unix:///tmp/r.sock', 'username' => 'a #b', 'password' => ';secret', 'prefix' => 'q:'],
            ConfigFile::load($path)
        );
    }
}
