<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Job;
use Delayer\Message;
use Delayer\Worker;

/**
 * The Worker in this process: its options, its logger (a callable or a
 * PSR-3 object), its listeners (one that throws does not stop it), stop()
 * from a handler, and the signal handlers it puts back when run() returns.
 * The behaviours that need signals and restarts run in worker processes
 * (WorkerTest).
 */
final class WorkerHooksTest extends RedisTestCase
{
    public function testBadOptionsAreRefused(): void
    {
        $client = $this->client();
        $cases = [
            'mode must be Worker::AT_LEAST_ONCE or Worker::AT_MOST_ONCE, got \'fast\'' => static fn () => new Worker($client, mode: 'fast'),
            'ttr must be more than 0 seconds, got 0' => static fn () => new Worker($client, ttr: 0),
            'idleWait must be a positive number of seconds, got 0' => static fn () => new Worker($client, idleWait: 0),
            'stopGrace must be a non-negative number of seconds, got -1' => static fn () => new Worker($client, stopGrace: -1),
            'reconnectMin must be a positive number of seconds, got NAN' => static fn () => new Worker($client, reconnectMin: NAN),
            'logger must be a callable, an object with a PSR-3 log() method, or null; got stdClass' => static fn () => new Worker($client, logger: new \stdClass()),
            'topic must not be empty' => static fn () => (new Worker($client))->handle('', static fn () => null),
        ];
        foreach ($cases as $message => $build) {
            try {
                $build();
                self::fail("expected: {$message}");
            } catch (InvalidArgumentException $e) {
                self::assertStringStartsWith($message, $e->getMessage());
            }
        }
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage('the worker has no handler: call handle() first');
        (new Worker($client))->run();
    }

    public function testLoggerListenersAndStopFromAHandler(): void
    {
        $client = $this->client();
        $client->pushTo('mail', 'a', 0, 'ok');
        $client->pushTo('mail', 'b', 0, 'fail');
        $client->pushTo('mail', 'c', 0, 'stop');
        $client->pushTo('mail', 'd', 0, 'never');
        $this->moveDue(4);

        // a PSR-3 logger: any object with log($level, $message, $context)
        $logger = new class () {
            /** @var list<array{0: string, 1: string}> */
            public array $lines = [];

            /** @param array<string, mixed> $context */
            public function log(string $level, string $message, array $context = []): void
            {
                $this->lines[] = [$level, $message];
            }
        };
        $sigterm = pcntl_signal_get_handler(SIGTERM);
        $worker = new Worker($client, ttr: 30, logger: $logger);
        $ran = [];
        $worker->handle('mail', function (Job $job) use (&$ran, $worker): void {
            $ran[] = $job->id;
            if ($job->body === 'fail') {
                throw new \DomainException('no such mailbox');
            }
            if ($job->body === 'stop') {
                $worker->stop();
            }
        });
        $events = [];
        $worker->on(static function (string $event, array $data) use (&$events): void {
            $events[] = [$event, $data['id'] ?? null];
        });
        $worker->on(static function (string $event): void {
            throw new \RuntimeException("listener broke on {$event}");
        });
        $worker->run();

        self::assertSame(['a', 'b', 'c'], $ran, 'no job after stop()');
        self::assertSame([
            ['started', null],
            ['job_started', 'a'], ['job_succeeded', 'a'],
            ['acked', 'a'], ['job_started', 'b'], ['job_failed', 'b'],
            ['job_started', 'c'], ['stopping', null], ['job_succeeded', 'c'],
            ['acked', 'c'], ['stopped', null],
        ], $events);
        self::assertSame('DomainException: no such mailbox', $this->redis->hGet('delayer:job_bucket:b', 'last_error'));
        self::assertIsFloat($this->redis->zScore('delayer:job_pool', 'b'), 'b is retried');
        self::assertSame(['d'], $this->redis->lRange('delayer:ready_queue:mail', 0, -1));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:a', 'delayer:job_bucket:c'));
        self::assertContains(['warning', 'job b of mail failed (attempt 1, retried): DomainException: no such mailbox'], $logger->lines);
        self::assertContains(['error', 'a listener failed on job_failed: RuntimeException: listener broke on job_failed'], $logger->lines);
        self::assertSame($sigterm, pcntl_signal_get_handler(SIGTERM), 'the SIGTERM handler of before is back');
        self::assertTrue($worker->isStopping());
    }

    public function testACallableLoggerAndAtMostOnce(): void
    {
        $client = $this->client();
        $client->pushTo('t', 'x', 0, 'stop');
        $this->moveDue(1);
        $lines = [];
        $worker = new Worker($client, mode: Worker::AT_MOST_ONCE, signals: false, logger: static function (string $level, string $message) use (&$lines): void {
            $lines[] = "{$level}: {$message}";
        });
        $seen = null;
        $worker->handle('t', static function (Job $job) use ($worker, &$seen): void {
            $seen = [$job->id, $job->attempts, $job->reservation, $job->deadline()];
            $worker->stop();
            try {
                $job->touch();
                self::fail('touch at most once');
            } catch (\LogicException $e) {
                self::assertSame('a job taken at most once holds no reservation to touch', $e->getMessage());
            }
        });
        $worker->run();
        self::assertSame(['x', 1, null, null], $seen);
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:x'));
        self::assertSame('info: stopping', $lines[1] ?? null);
        self::assertStringStartsWith('info: worker ', $lines[0]);
    }
}
