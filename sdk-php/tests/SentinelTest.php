<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\ReservedMessage;
use PHPUnit\Framework\TestCase;

/**
 * Sentinel mode: [redis] mode = sentinel read as the server reads it, and a
 * client (and the real delayer server) through a failover: 1 master, 1
 * replica and 3 sentinels started by testkit/sentinel.py, the master killed
 * with SIGKILL mid-run.
 */
final class SentinelTest extends TestCase
{
    /** @var resource|null the sentinel.py process */
    private $kit = null;
    /** @var array<int, resource> its stdin and stdout */
    private array $pipes = [];
    /** @var resource|null the delayer server */
    private $server = null;
    private string $dir = '';

    protected function tearDown(): void
    {
        if ($this->server !== null) {
            proc_terminate($this->server, 9);
            proc_close($this->server);
        }
        if ($this->kit !== null) {
            @fwrite($this->pipes[0], "stop\n");
            fclose($this->pipes[0]);
            fclose($this->pipes[1]);
            proc_close($this->kit);
        }
        if ($this->dir !== '') {
            exec('rm -rf ' . escapeshellarg($this->dir));
        }
    }

    /** @return iterable<string, array{0: string, 1: string}> */
    public static function badFiles(): iterable
    {
        yield 'cluster without nodes' => ["[redis]\n\nmode = cluster\n",
            ':3: [redis] mode: mode = cluster needs nodes (seed nodes: host:port,host:port,...)'];
        yield 'nodes-in-standalone' => ["[redis]\nport = 1\nnodes = a:1\n",
            ':3: [redis] nodes: is only used with mode = sentinel or cluster (mode is standalone)'];
        yield 'no-master-name' => ["[redis]\nmode = sentinel\nnodes = a:1\n", ':2: [redis] mode: mode = sentinel needs master_name'];
        yield 'bad-node' => ["[redis]\nmode = sentinel\nnodes = a:1,b\nmaster_name = m\n", ':3: [redis] nodes: "b" is not host:port'];
    }

    /** @dataProvider badFiles */
    public function testBadModeSettingsAreRefusedAsTheServerRefusesThem(string $text, string $message): void
    {
        $path = tempnam(sys_get_temp_dir(), 'delayer-conf-');
        file_put_contents($path, $text);
        try {
            Client::fromConfig($path);
            self::fail('accepted');
        } catch (ConfigException $e) {
            self::assertSame($path . $message, $e->getMessage());
        } finally {
            unlink($path);
        }
    }

    public function testSentinelOptionsGoTogether(): void
    {
        $this->expectException(ConfigException::class);
        new Client(['host' => '127.0.0.1', 'master_name' => 'm']);
    }

    /** @return iterable<string, array{0: bool}> */
    public static function transports(): iterable
    {
        yield 'password' => [false];
        yield 'tls' => [true];
    }

    /** @dataProvider transports */
    public function testAClientAndTheServerFollowAFailover(bool $tls): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-sentinel-' . getmypid() . '-' . bin2hex(random_bytes(3));
        @mkdir($this->dir);
        $env = ['SENTINEL_REDIS_PASSWORD' => 'master-pw'];
        $tlsLines = '';
        if ($tls) {
            $certs = RedisServer::makeCertificates($this->dir);
            $env = ['SENTINEL_TLS' => "{$certs['cert']},{$certs['key']},{$certs['ca']}"];
            $tlsLines = "tls = yes\ntls_ca_file = {$certs['ca']}\n";
        }
        $root = \dirname(__DIR__, 2);
        // The repository's .venv has redis-py (tools/install-deps.sh), which sentinel.py uses.
        $python = getenv('DELAYER_PYTHON') ?: (is_file("{$root}/.venv/bin/python") ? "{$root}/.venv/bin/python" : 'python3');
        $this->kit = proc_open([$python, "{$root}/testkit/sentinel.py", $this->dir],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', "{$this->dir}/kit.log", 'a']],
            $this->pipes, null, $env + getenv());
        self::assertIsResource($this->kit);
        $started = json_decode((string) fgets($this->pipes[1]), true);
        self::assertIsArray($started, 'sentinel.py did not start: ' . @file_get_contents("{$this->dir}/kit.log"));
        $conf = "{$this->dir}/delayer.conf";
        file_put_contents($conf, "[delayer]\ntimer_interval = 50\n\n[redis]\nmode = sentinel\n"
            . "nodes = {$started['nodes']}\nmaster_name = {$started['master_name']}\n"
            . ($tls ? $tlsLines : "password = master-pw\n"));
        $this->startServer($conf);
        $client = Client::fromConfig($conf);
        $this->round($client, 'before');
        fwrite($this->pipes[0], "kill-master\n");
        $moved = json_decode((string) fgets($this->pipes[1]), true);
        self::assertIsArray($moved);
        self::assertNotSame($started['master'], $moved['master']);
        $this->round($client, 'after');
        self::assertTrue(proc_get_status($this->server)['running'], 'the server kept running');
        self::assertStringNotContainsString('master-pw', (string) file_get_contents("{$this->dir}/server.log"));
    }

    /** Push two jobs, pop one and reserve+ack the other, retrying through a failover. */
    private function round(Client $client, string $tag): void
    {
        $topic = "php-{$tag}";
        $this->eventually(fn () => $client->pushTo($topic, "{$tag}-1", 0));
        $this->eventually(fn () => $client->pushTo($topic, "{$tag}-2", 0));
        $popped = $this->eventually(fn () => $client->pop($topic));
        self::assertSame("{$tag}-1", $popped->getId());
        $held = $this->eventually(fn () => $client->reserve($topic, 60));
        self::assertInstanceOf(ReservedMessage::class, $held);
        self::assertSame("{$tag}-2", $held->getId());
        self::assertTrue($client->ack($held));
    }

    /**
     * @template T
     * @param \Closure(): T $call
     * @return T
     */
    private function eventually(\Closure $call): mixed
    {
        $until = microtime(true) + 60;
        $last = null;
        while (microtime(true) < $until) {
            try {
                $got = $call();
                if ($got !== false && $got !== null) {
                    return $got;
                }
            } catch (ConnectionException $e) {
                $last = $e->getMessage();
            }
            usleep(50000);
        }
        self::fail('never happened; last error: ' . var_export($last, true));
    }

    private function startServer(string $conf): void
    {
        $root = \dirname(__DIR__, 2);
        $binary = getenv('DELAYER_BIN') ?: "{$root}/target/debug/delayer";
        if (!is_file($binary)) {
            exec('cargo build -q -j 2 -p delayer-server --manifest-path ' . escapeshellarg("{$root}/Cargo.toml") . ' 2>&1', $out, $code);
            self::assertSame(0, $code, "cargo build -p delayer-server failed:\n" . implode("\n", $out));
        }
        $this->server = proc_open([$binary, '-c', $conf],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/server.log", 'w'], 2 => ['file', "{$this->dir}/server.log", 'a']],
            $pipes, $this->dir);
        self::assertIsResource($this->server);
    }
}
