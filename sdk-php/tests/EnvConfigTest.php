<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\ConfigFile;
use Delayer\Exception\ConfigException;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

/**
 * DELAYER_* environment variables over delayer.conf: the shared cases
 * (conformance/env_cases.json, run by every SDK's reader) and fromConfig
 * against a real Redis that requires a password given through a _FILE.
 */
final class EnvConfigTest extends TestCase
{
    private string $dir;

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-env-php-' . getmypid() . '-' . bin2hex(random_bytes(4));
        mkdir($this->dir);
    }

    protected function tearDown(): void
    {
        foreach (['DELAYER_REDIS_PORT', 'DELAYER_REDIS_PASSWORD_FILE', 'DELAYER_REDIS_PASSWORD'] as $var) {
            putenv($var);
        }
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    public function testEverySharedCase(): void
    {
        $cases = json_decode((string) file_get_contents(__DIR__ . '/../../conformance/env_cases.json'), true, 512, JSON_THROW_ON_ERROR);
        foreach ($cases['cases'] as $case) {
            $fill = fn (string $text): string => str_replace('{dir}', $this->dir, $text);
            foreach ($case['files'] ?? [] as $name => $content) {
                file_put_contents("{$this->dir}/{$name}", $content);
            }
            $path = "{$this->dir}/delayer.conf";
            file_put_contents($path, $case['file']);
            $environ = array_map($fill, $case['env']);
            try {
                $config = ConfigFile::load($path, $environ);
            } catch (ConfigException $e) {
                self::assertArrayHasKey('error', $case, "{$case['name']}: {$e->getMessage()}");
                self::assertStringStartsWith($fill($case['error']), $e->getMessage(), $case['name']);
                continue;
            }
            self::assertArrayNotHasKey('error', $case, $case['name']);
            $effective = [
                'host' => $config['host'] ?? '127.0.0.1', 'port' => $config['port'] ?? 6379,
                'database' => $config['database'] ?? 0, 'username' => $config['username'] ?? null,
                'password' => $config['password'] ?? null, 'url' => $config['url'] ?? null,
                'prefix' => $config['prefix'] ?? 'delayer:', 'layout' => $config['layout'] ?? 'classic',
            ];
            foreach ($case['expect'] as $key => $want) {
                self::assertSame($want, $effective[$key], "{$case['name']}: {$key}");
            }
        }
    }

    public function testFromConfigTakesThePasswordFileAndPortFromTheEnvironment(): void
    {
        $password = 'pw-env-php-' . bin2hex(random_bytes(4));
        $server = RedisServer::start($password);
        try {
            file_put_contents("{$this->dir}/redis.password", "{$password}\n");
            $path = "{$this->dir}/delayer.conf";
            file_put_contents($path, "[delayer]\nkey_prefix = env-php:\n\n[redis]\nport = " . RedisServer::freePort() . "\n");
            putenv("DELAYER_REDIS_PORT={$server->port}");
            putenv("DELAYER_REDIS_PASSWORD_FILE={$this->dir}/redis.password");
            $client = Client::fromConfig($path);
            $client->push(Message::create('from-env', 't', 'b'), 60);
            self::assertNotFalse($server->connect()->zScore('env-php:job_pool', 'from-env'));
            putenv('DELAYER_REDIS_PASSWORD=also');
            try {
                Client::fromConfig($path);
                self::fail('both DELAYER_REDIS_PASSWORD and its _FILE were taken');
            } catch (ConfigException $e) {
                self::assertStringContainsString('DELAYER_REDIS_PASSWORD is set too', $e->getMessage());
                self::assertStringNotContainsString($password, $e->getMessage());
            }
        } finally {
            $server->kill();
        }
    }
}
