<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\DeadLetter;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

/**
 * The README's worker loops are examples/*.php, verbatim, and they work as
 * users will run them: a separate php process against a real redis-server
 * that is stopped and started again while the worker waits (issue 10,
 * item 4). The test plays the Delayer server with lua/move.lua.
 */
final class ExamplesTest extends TestCase
{
    private const EXAMPLES = ['worker.php', 'reliable_worker.php', 'job_worker.php'];

    private ?RedisServer $server = null;

    /** @var resource|null */
    private $worker = null;

    private string $dir = '';

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-example-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        if ($this->worker !== null) {
            proc_terminate($this->worker);
            proc_close($this->worker);
            $this->worker = null;
        }
        $this->server?->stop();
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    public function testTheReadmeShowsTheExamplesVerbatim(): void
    {
        $readme = (string) file_get_contents(\dirname(__DIR__) . '/README.md');
        foreach (self::EXAMPLES as $file) {
            $code = (string) file_get_contents(\dirname(__DIR__) . "/examples/{$file}");
            self::assertStringContainsString("```php\n{$code}```\n", $readme, "the README shows examples/{$file} as it is");
        }
    }

    public function testTheWorkerRidesOutARedisRestart(): void
    {
        $this->startWorker('worker.php');
        $this->ready(Message::create('a1', 'order', 'hello'));
        $this->waitForOutput("order a1: hello\n");

        $this->restartRedisUnderTheWorker();

        $this->ready(Message::create('a2', 'order', 'again'));
        $this->waitForOutput("order a1: hello\norder a2: again\n");
    }

    public function testTheReliableWorkerRidesOutARedisRestart(): void
    {
        $this->startWorker('reliable_worker.php');
        $this->ready(Message::create('m1', 'mail', '{"to":"ann@example.com"}'), Message::create('m0', 'mail', 'not json'));
        $this->waitForOutput("mail m1 to ann@example.com, attempt 1\n");
        $client = $this->client();
        $this->waitUntil(fn (): bool => $client->deadLetters('mail') !== [], 'm0 is buried');
        $dead = $client->deadLetters('mail');
        self::assertSame([['m0', DeadLetter::BURIED]], array_map(static fn (DeadLetter $d): array => [$d->id, $d->reason], $dead));
        $this->waitUntil(fn (): bool => $this->server->connect()->exists('delayer:job_bucket:m1') === 0, 'm1 is acked');

        $this->restartRedisUnderTheWorker();

        $this->ready(Message::create('m2', 'mail', '{"to":"bob@example.com"}'));
        $this->waitForOutput("mail m1 to ann@example.com, attempt 1\nmail m2 to bob@example.com, attempt 1\n");
        $this->waitUntil(fn (): bool => $this->server->connect()->exists('delayer:job_bucket:m2') === 0, 'm2 is acked');
    }

    public function testTheJobWorkerRidesOutARedisRestartAndStopsOnSigterm(): void
    {
        $this->startWorker('job_worker.php');
        $this->ready(
            Message::create('m1', 'mail', '{"to":"ann@example.com"}'),
            Message::create('m0', 'mail', 'not json')->withMaxAttempts(1),
            Message::create('r1', 'report', 'sales,costs'),
        );
        $this->waitForLines(['mail m1 to ann@example.com, attempt 1', 'report r1: sales', 'report r1: costs']);
        $client = $this->client();
        $this->waitUntil(fn (): bool => $client->deadLetters('mail') !== [], 'm0 is dead');
        self::assertSame('JsonException: Syntax error', $this->server->connect()->hGet('delayer:job_bucket:m0', 'last_error'));
        self::assertStringContainsString('delayer: mail m0 failed (dead): JsonException: Syntax error', $this->read('stderr'));
        $this->waitUntil(fn (): bool => $this->server->connect()->exists('delayer:job_bucket:m1', 'delayer:job_bucket:r1') === 0, 'm1 and r1 acked');

        $this->restartRedisUnderTheWorker('delayer worker: warning: Redis: ');

        $this->ready(Message::create('m2', 'mail', '{"to":"bob@example.com"}'));
        $this->waitForLines(['mail m1 to ann@example.com, attempt 1', 'report r1: sales', 'report r1: costs', 'mail m2 to bob@example.com, attempt 1']);
        $this->waitUntil(fn (): bool => $this->server->connect()->exists('delayer:job_bucket:m2') === 0, 'm2 is acked');

        proc_terminate($this->worker, SIGTERM);
        $status = proc_get_status($this->worker);
        $until = microtime(true) + 30;
        while ($status['running'] && microtime(true) < $until) {
            usleep(20000);
            $status = proc_get_status($this->worker);
        }
        self::assertFalse($status['running'], 'the worker stopped on SIGTERM');
        self::assertSame(0, $status['exitcode']);
        proc_close($this->worker);
        $this->worker = null;
    }

    private function startWorker(string $example): void
    {
        $this->server = RedisServer::start();
        $env = ['DELAYER_URL' => "redis://127.0.0.1:{$this->server->port}/0"] + getenv();
        $this->worker = proc_open(
            [PHP_BINARY, \dirname(__DIR__) . "/examples/{$example}"],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->dir . '/stdout', 'w'], 2 => ['file', $this->dir . '/stderr', 'w']],
            $pipes,
            null,
            $env
        );
        self::assertIsResource($this->worker);
    }

    /**
     * Stops Redis while the worker waits in bPop / bReserve, lets the worker
     * fail a few times against the closed port (its loop backs off), and
     * starts Redis again on the same port.
     */
    private function restartRedisUnderTheWorker(string $marker = 'delayer: '): void
    {
        $this->server->kill();
        $this->waitUntil(fn (): bool => substr_count($this->read('stderr'), $marker) >= 3, 'the worker saw Redis go');
        $this->server->restart();
    }

    private function client(): Client
    {
        return new Client(['host' => '127.0.0.1', 'port' => $this->server->port, 'timeout' => 2]);
    }

    /** Pushes the jobs due now and moves them to their ready queues, as the server would. */
    private function ready(Message ...$messages): void
    {
        $client = $this->client();
        foreach ($messages as $message) {
            $client->schedule($message, 0);
        }
        $redis = $this->server->connect();
        $move = (string) file_get_contents(\dirname(__DIR__, 2) . '/lua/move.lua');
        $moved = 0;
        $this->waitUntil(static function () use ($redis, $move, $messages, &$moved): bool {
            $result = $redis->eval($move, [
                'delayer:job_pool', 'delayer:malformed', 'delayer:scheduled_count', 'delayer:topics', 'delayer:reserved',
                'delayer:job_bucket:', 'delayer:ready_queue:', '1000',
            ], 5);
            self::assertIsArray($result, 'move.lua failed: ' . $redis->getLastError());
            $moved += (int) $result[0];
            return $moved >= \count($messages);
        }, 'the jobs are moved');
    }

    private function waitForOutput(string $expected): void
    {
        $this->waitUntil(fn (): bool => $this->read('stdout') === $expected, 'worker output ' . json_encode($expected));
    }

    /**
     * The worker's output is these lines, in any order (its topics take
     * turns, and which it looks at first depends on when the jobs arrive).
     *
     * @param list<string> $lines
     */
    private function waitForLines(array $lines): void
    {
        sort($lines);
        $this->waitUntil(function () use ($lines): bool {
            $seen = explode("\n", rtrim($this->read('stdout'), "\n"));
            sort($seen);
            return $seen === $lines;
        }, 'worker output lines ' . json_encode($lines));
    }

    private function read(string $stream): string
    {
        return (string) @file_get_contents("{$this->dir}/{$stream}");
    }

    /** @param \Closure(): bool $done */
    private function waitUntil(\Closure $done, string $what, float $deadline = 30.0): void
    {
        $until = microtime(true) + $deadline;
        while (!$done()) {
            if (microtime(true) > $until || !proc_get_status($this->worker)['running']) {
                self::fail("waiting for {$what}: worker stdout " . json_encode($this->read('stdout'))
                    . ', stderr ' . json_encode(substr($this->read('stderr'), -2000)));
            }
            usleep(20000);
        }
    }
}
