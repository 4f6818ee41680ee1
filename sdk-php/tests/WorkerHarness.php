<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

/**
 * Base of the tests that run Worker processes (tests/worker/worker_process.php)
 * against a redis-server of their own, which a test may stop and start. The
 * test plays the Delayer server: tick() runs the repository's move.lua and
 * release.lua's "expired" mode, as the server's mover does.
 */
abstract class WorkerHarness extends TestCase
{
    protected ?RedisServer $server = null;

    /** @var array<int, resource> pid => worker process */
    private array $workers = [];

    protected string $dir = '';

    private ?\Redis $redis = null;

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-worker-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        foreach ($this->workers as $process) {
            proc_terminate($process, SIGKILL);
            proc_close($process);
        }
        $this->workers = [];
        if ($this->server !== null) {
            $aof = $this->server->dir . '/appendonlydir';
            $this->server->kill();
            foreach (glob($aof . '/*') ?: [] as $file) {
                @unlink($file);
            }
            @rmdir($aof);
            $this->server->stop();
        }
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    /** @param list<string> $args more redis-server arguments */
    protected function startRedis(array $args = []): void
    {
        $this->server = RedisServer::start(null, 10.0, $args);
    }

    protected function client(): Client
    {
        return new Client(['host' => '127.0.0.1', 'port' => $this->server->port, 'timeout' => 2]);
    }

    protected function redis(): \Redis
    {
        return $this->redis ??= $this->server->connect();
    }

    /**
     * Starts a worker process; returns its pid.
     *
     * @param array<string, string> $env WORKER_* settings (see worker_process.php)
     */
    protected function startWorker(array $env, string $log = 'events'): int
    {
        $env = $env + [
            'DELAYER_URL' => "redis://127.0.0.1:{$this->server->port}/0",
            'WORKER_LOG' => "{$this->dir}/{$log}",
        ] + getenv();
        $n = \count($this->workers);
        $process = proc_open(
            [PHP_BINARY, __DIR__ . '/worker/worker_process.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/stdout{$n}", 'w'], 2 => ['file', "{$this->dir}/stderr{$n}", 'w']],
            $pipes,
            null,
            $env
        );
        self::assertIsResource($process);
        $pid = proc_get_status($process)['pid'];
        $this->workers[$pid] = $process;
        $this->waitUntil(fn (): bool => $this->events(['event' => 'started', 'pid' => $pid], $log) !== [], "worker {$pid} started");
        return $pid;
    }

    protected function signal(int $pid, int $signal): void
    {
        posix_kill($pid, $signal);
    }

    /** Waits for the worker to exit; returns its exit code. */
    protected function waitForExit(int $pid, float $deadline = 30.0): int
    {
        $code = -1;
        $this->waitUntil(function () use ($pid, &$code): bool {
            $status = proc_get_status($this->workers[$pid]);
            $code = $status['exitcode'];
            return !$status['running'];
        }, "worker {$pid} exits", $deadline);
        proc_close($this->workers[$pid]);
        unset($this->workers[$pid]);
        return $code;
    }

    protected function running(int $pid): bool
    {
        return isset($this->workers[$pid]) && proc_get_status($this->workers[$pid])['running'];
    }

    /**
     * The events logged, those matching every key of $match.
     *
     * @param array<string, mixed> $match
     * @return list<array<string, mixed>>
     */
    protected function events(array $match = [], string $log = 'events'): array
    {
        $lines = explode("\n", (string) @file_get_contents("{$this->dir}/{$log}"));
        $events = [];
        foreach ($lines as $line) {
            $event = json_decode($line, true);
            if (\is_array($event) && self::eventMatches($event, $match)) {
                $events[] = $event;
            }
        }
        return $events;
    }

    /** @param list<Message|array{0: Message, 1: int|float}> $jobs pushed due now (or after the delay given) */
    protected function push(array $jobs): void
    {
        $this->client()->pushMany(array_map(static fn ($j): array => $j instanceof Message ? [$j, 0] : $j, $jobs));
    }

    /** One tick of the server: moves due jobs, ends expired reservations. Tolerates Redis being away. */
    protected function tick(): void
    {
        try {
            $redis = $this->redis();
            $move = (string) file_get_contents(\dirname(__DIR__, 2) . '/lua/move.lua');
            $release = (string) file_get_contents(\dirname(__DIR__, 2) . '/lua/release.lua');
            $k = new \Delayer\Keys();
            $redis->eval($move, [
                $k->pool(), $k->malformed(), $k->scheduledCount(), $k->topics(), $k->reserved(),
                $k->bucketPrefix(), $k->readyQueuePrefix(), '1000',
            ], 5);
            $redis->eval($release, [
                $k->reserved(), $k->pool(), $k->malformed(), $k->scheduledCount(),
                $k->bucketPrefix(), $k->deadPrefix(), 'backoff', 'expired', '1000',
            ], 4);
        } catch (\RedisException) {
            $this->redis = null; // Redis restarting: next tick connects again
        }
    }

    /**
     * Polls $done (ticking the server between polls) until it holds, or fails
     * after $deadline seconds with the workers' logs.
     *
     * @param \Closure(): bool $done
     */
    protected function waitUntil(\Closure $done, string $what, float $deadline = 60.0): void
    {
        $until = microtime(true) + $deadline;
        while (!$done()) {
            if (microtime(true) > $until) {
                $stderr = '';
                foreach (glob("{$this->dir}/stderr*") ?: [] as $file) {
                    $stderr .= substr((string) file_get_contents($file), -1500);
                }
                self::fail("waiting for {$what}: last events " . substr((string) @file_get_contents("{$this->dir}/events"), -3000)
                    . " stderr {$stderr}");
            }
            $this->tick();
            usleep(20000);
        }
    }

    /** @param array<string, mixed> $event @param array<string, mixed> $match */
    private static function eventMatches(array $event, array $match): bool
    {
        foreach ($match as $key => $value) {
            if (!\array_key_exists($key, $event) || $event[$key] !== $value) {
                return false;
            }
        }
        return true;
    }
}
