<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Message;

final class ConfigTest extends RedisTestCase
{
    /** @var list<string> */
    private array $files = [];

    protected function tearDown(): void
    {
        foreach ($this->files as $file) {
            @unlink($file);
        }
        parent::tearDown();
    }

    private function writeConfig(string $text): string
    {
        $path = tempnam(sys_get_temp_dir(), 'delayer-conf-');
        file_put_contents($path, $text);
        $this->files[] = $path;
        return $path;
    }

    public function testFromConfigReadsTheServersFile(): void
    {
        $port = RedisServer::shared()->port;
        $path = $this->writeConfig(<<<INI
            ; delayer.conf, as the server reads it
            [delayer]
            pid = /var/run/delayer.pid   ; ignored by clients
            timer_interval = 1000 ; ms
            key_prefix = cfg:delayer: ; our prefix
            [redis]
            host = 127.0.0.1 ; local
            port = {$port}	; tab before the comment
            database = 2 ; not the default
            password = ; none
            max_idle = 2
            INI);
        $client = Client::fromConfig($path);
        self::assertSame('cfg:delayer:', $client->getKeys()->prefix());
        $client->push(Message::create('from-conf', 'conf', 'body'), 0);
        $this->redis->select(2);
        self::assertSame(['topic' => 'conf', 'body' => 'body'], $this->redis->hGetAll('cfg:delayer:job_bucket:from-conf'));
        $this->moveDue(1, 'cfg:delayer:');
        self::assertSame('from-conf', $client->pop('conf')->id);
    }

    public function testCommentsAndQuotesAreReadAsTheServerReadsThem(): void
    {
        $path = $this->writeConfig(implode("\r\n", [
            '# hash comment line',
            '   ; indented comment',
            '[redis] ; comment after a section',
            'host = redis.local # hash comment after a value',
            'port = 1 ; x',
            'username = app;user',
            'database = ; empty: the default',
            'password = "a ;b #c" ; quoted',
            '[delayer]',
            "key_prefix = p#x:\t; tab before the comment",
            "pid = 'single quoted ; kept' ; ignored key",
        ]));
        self::assertSame(
            ['host' => 'redis.local', 'port' => 1, 'username' => 'app;user', 'password' => 'a ;b #c', 'prefix' => 'p#x:'],
            \Delayer\ConfigFile::load($path)
        );
    }

    public function testTheRepositoryDelayerConfIsReadable(): void
    {
        $path = \dirname(__DIR__, 2) . '/delayer.conf';
        if (!is_file($path)) {
            self::markTestSkipped('no delayer.conf at the repository root');
        }
        $config = \Delayer\ConfigFile::load($path);
        self::assertIsInt($config['port'] ?? 6379);
        self::assertArrayNotHasKey('password', $config, 'the shipped file has no password');
    }

    public function testAnEmptyFileGivesTheDefaults(): void
    {
        $path = $this->writeConfig("; nothing\n[redis]\n[delayer]\n");
        self::assertSame([], \Delayer\ConfigFile::load($path));
    }

    /** @return array<string, array{string, string}> */
    public static function badNumbers(): array
    {
        return [
            'port not a number' => ["; c\n[redis]\nport = abc ; oops\n", ':3: [redis] port: '],
            'port out of range' => ["[redis]\nport = 70000\n", ':2: [redis] port: '],
            'port zero' => ["[redis]\r\n\r\nport = 0\r\n", ':3: [redis] port: '],
            'port negative' => ["[redis]\nport = -1\n", ':2: [redis] port: '],
            'database fraction' => ["[delayer]\npid = x\n[redis]\ndatabase = 1.5\n", ':4: [redis] database: '],
        ];
    }

    /** @dataProvider badNumbers */
    public function testBadNumbersNameTheFileLineSectionAndKey(string $text, string $where): void
    {
        $path = $this->writeConfig($text);
        try {
            Client::fromConfig($path);
            self::fail('expected ConfigException');
        } catch (ConfigException $e) {
            self::assertStringStartsWith($path . $where, $e->getMessage());
        }
    }

    private const REDIS_KEYS = 'url, host, port, database, username, password, tls_ca_file, tls_cert_file, tls_key_file,'
        . ' max_idle, max_active, idle_timeout, conn_max_lifetime, mode, nodes, master_name, sentinel_username,'
        . ' sentinel_password, tls, require_noeviction';

    private const DELAYER_KEYS = 'pid, timer_interval, access_log, error_log, batch_size, key_prefix, layout, log_level, log_format, metrics_addr,'
        . ' http_addr, http_token, http_read_token, http_allow_remote, http_allowed_hosts, http_trusted_proxies, http_session_secret, http_session_lifetime, http_max_connections,'
        . ' http_header_timeout, http_body_timeout, http_redis_timeout, http_max_waiting, metrics_allow_remote';

    /** @return array<string, array{string, string}> file text, and the error after the file's path */
    public static function unknownNames(): array
    {
        return [
            'a typo in [redis]' => ["[redis]\nhost = 127.0.0.1\nprot = 16391\n", ':3: [redis] prot: unknown key (did you mean port?); [redis] takes ' . self::REDIS_KEYS],
            'a typo in [delayer]' => ["; c\n[delayer]\ntimer_intervall = 5 ; x\n", ':3: [delayer] timer_intervall: unknown key (did you mean timer_interval?); [delayer] takes ' . self::DELAYER_KEYS],
            'a key of the other section' => ["[delayer]\nport = 6380\n", ':2: [delayer] port: unknown key; [delayer] takes ' . self::DELAYER_KEYS],
            'keys are case-sensitive' => ["[redis]\nPort = 6380\n", ':2: [redis] Port: unknown key (did you mean port?); [redis] takes ' . self::REDIS_KEYS],
            'an unknown section' => ["[redis]\nport = 1\n\n[mysql]\nhost = x\n", ':4: [mysql]: unknown section; known sections are [delayer] and [redis]'],
            'sections are case-sensitive' => ["[Redis]\nport = 1\n", ':1: [Redis]: unknown section (did you mean [redis]?); known sections are [delayer] and [redis]'],
            'a key before any section' => ["port = 6380\n[redis]\n", ':1: port: keys must be inside a [delayer] or [redis] section'],
            'a key with ":"' => ["[redis]\nprot: 6380\n", ':2: [redis] prot: unknown key (did you mean port?); [redis] takes ' . self::REDIS_KEYS],
            'before any bad value' => ["[redis]\nport = abc\n[delayer]\nkey_prefx = x\n", ':4: [delayer] key_prefx: unknown key (did you mean key_prefix?); [delayer] takes ' . self::DELAYER_KEYS],
            'the first in the file' => ["[redis]\nprot = 1\n[mysql]\nx = 1\n", ':2: [redis] prot: unknown key (did you mean port?); [redis] takes ' . self::REDIS_KEYS],
        ];
    }

    /** @dataProvider unknownNames */
    public function testUnknownKeysAndSectionsAreRejectedAsTheServerRejectsThem(string $text, string $error): void
    {
        $path = $this->writeConfig($text);
        try {
            Client::fromConfig($path);
            self::fail('expected ConfigException');
        } catch (ConfigException $e) {
            self::assertSame($path . $error, $e->getMessage());
        }
    }

    public function testEveryKeyOfTheServerIsAccepted(): void
    {
        $port = RedisServer::shared()->port;
        $path = $this->writeConfig(<<<INI
            [delayer]
            pid = /run/delayer.pid
            timer_interval = 1000
            access_log = logs/access.log
            error_log = logs/error.log
            batch_size = 1000
            key_prefix = every:
            log_level = info
            metrics_addr = 127.0.0.1:9464
            [redis]
            url =
            host = 127.0.0.1
            port: {$port}
            database = 0
            username =
            password =
            tls_ca_file =
            tls_cert_file =
            tls_key_file =
            max_idle = 2
            max_active = 20
            idle_timeout = 3600
            conn_max_lifetime = 3600
            require_noeviction = yes
            [mysql]
            INI);
        self::assertSame(['host' => '127.0.0.1', 'port' => $port, 'database' => 0, 'prefix' => 'every:'], \Delayer\ConfigFile::load($path));
        self::assertSame('every:', Client::fromConfig($path)->getKeys()->prefix());
    }

    /** The first 1.0 layout of mix-basic/delayer's delayer.conf: [delayerd] and [redis] timeout. */
    public function testDelayer1xKeysThisVersionDoesNotUseAreAccepted(): void
    {
        $path = $this->writeConfig("[delayerd]\ninterval = 1000 ; ms\naccess_log = logs/access.log\nerror_log = logs/error.log\n\n"
            . "[redis]\nhost = 127.0.0.1\nport = 6390\ndatabase = 0\npassword =   ; none\ntimeout = 3\nmax_idle = 2\nmax_active = 20\n");
        self::assertSame(['host' => '127.0.0.1', 'port' => 6390, 'database' => 0], \Delayer\ConfigFile::load($path));
        // Only those: another unknown key in [redis] is still refused.
        $path = $this->writeConfig("[redis]\ntimeout = 3\ntimeouts = 3\n");
        try {
            \Delayer\ConfigFile::load($path);
            self::fail('expected ConfigException');
        } catch (ConfigException $e) {
            self::assertSame("{$path}:3: [redis] timeouts: unknown key; [redis] takes " . self::REDIS_KEYS, $e->getMessage());
        }
    }

    public function testAMissingFileRaisesConfigException(): void
    {
        $this->expectException(ConfigException::class);
        $this->expectExceptionMessage('/nonexistent/delayer.conf');
        Client::fromConfig('/nonexistent/delayer.conf');
    }
}
