<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\DeadLetter;
use Delayer\Message;
use Delayer\Worker;

/**
 * The Worker, one behaviour per test, each in real worker processes
 * (tests/worker/worker_process.php) against a real redis-server, the test
 * playing the Delayer server (moves and expiry): at least once and at most
 * once, touches (explicit and automatic), stop on SIGTERM / SIGINT with its
 * grace period, a Redis restart, fairness across topics.
 */
final class WorkerTest extends WorkerHarness
{
    protected function setUp(): void
    {
        parent::setUp();
        $this->startRedis();
    }

    public function testAtLeastOnceAcksWhatSucceedsAndRetriesWhatThrows(): void
    {
        $fast = Backoff::fixed(0.1);
        $this->push([
            Message::create('ok1', 'mail', 'ok'),
            Message::create('ok2', 'mail', 'ok'),
            Message::create('flaky', 'mail', 'fail-first')->withBackoff($fast),
            Message::create('broken', 'mail', 'fail')->withMaxAttempts(2)->withBackoff($fast),
        ]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail']);

        $client = $this->client();
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'acked'])) === 3 && $client->deadLetters('mail') !== [], 'three acks and a dead letter');
        $acked = array_column($this->events(['event' => 'acked']), 'id');
        sort($acked);
        self::assertSame(['flaky', 'ok1', 'ok2'], $acked);
        self::assertSame(0, $this->redis()->exists('delayer:job_bucket:ok1', 'delayer:job_bucket:ok2', 'delayer:job_bucket:flaky'));
        self::assertSame([1, 2], array_column($this->events(['event' => 'run', 'id' => 'flaky']), 'attempts'));

        // the failure is on the job: class and message
        [$dead] = $client->deadLetters('mail');
        self::assertSame(['broken', DeadLetter::MAX_ATTEMPTS, 2], [$dead->id, $dead->reason, $dead->attempts]);
        self::assertSame('RuntimeException: boom broken', $this->redis()->hGet('delayer:job_bucket:broken', 'last_error'));
        self::assertSame(['retried', 'dead'], array_column($this->events(['event' => 'job_failed', 'id' => 'broken']), 'outcome'));
        self::assertSame(['retried'], array_column($this->events(['event' => 'job_failed', 'id' => 'flaky']), 'outcome'));
        self::assertSame('RuntimeException: first try of flaky', $this->events(['event' => 'job_failed', 'id' => 'flaky'])[0]['error']);
        self::assertSame(0, $this->redis()->zCard('delayer:reserved'));

        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }

    public function testAtMostOncePopsAndDropsWhatThrows(): void
    {
        $this->push([Message::create('ok', 'mail', 'ok'), Message::create('bad', 'mail', 'fail')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail', 'WORKER_MODE' => 'at-most-once']);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'job_failed']) !== [] && $this->events(['event' => 'done']) !== [], 'both jobs ran');
        self::assertSame('dropped', $this->events(['event' => 'job_failed'])[0]['outcome']);
        self::assertSame([['ok', 1]], array_map(static fn (array $e): array => [$e['id'], $e['attempts']], $this->events(['event' => 'job_succeeded'])));
        // popped: nothing left anywhere, nothing was reserved
        self::assertSame(0, $this->redis()->exists('delayer:job_bucket:ok', 'delayer:job_bucket:bad', 'delayer:reserved'));
        self::assertSame([], $this->events(['event' => 'acked']));
        self::assertNotSame([], $this->events(['event' => 'log', 'level' => 'error']));
        $this->signal($pid, SIGINT);
        self::assertSame(0, $this->waitForExit($pid));
    }

    public function testAHandlerKeepsItsReservationWithTouchAndExtend(): void
    {
        // ttr 2 s (too short for automatic touches): without its own touches
        // each job would expire, run again, and its ack would fail
        $this->push([Message::create('touching', 'long', 'touch:5:0.3'), Message::create('extending', 'long', 'extend:4:4')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'long', 'WORKER_TTR' => '2']);
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'acked'])) === 2, 'both jobs acked');

        self::assertCount(2, $this->events(['event' => 'run']), 'each job ran once');
        self::assertSame([], $this->events(['event' => 'ack_lost']));
        $touches = array_column($this->events(['event' => 'explicit_touch']), 'deadline');
        self::assertGreaterThanOrEqual(8, \count($touches));
        self::assertSame($touches, array_values(array_unique($touches)), 'each touch moves the deadline');
        $extend = $this->events(['event' => 'extend'])[0];
        self::assertEqualsWithDelta($extend['before'] + 4, $extend['after'], 0.5);
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }

    public function testALongHandlerIsTouchedAutomatically(): void
    {
        // the same 9 s job under ttr 4 s, with and without automatic touches
        $this->push([Message::create('auto', 'auto', 'sleep:9'), Message::create('manual', 'manual', 'sleep:9')]);
        $auto = $this->startWorker(['WORKER_TOPICS' => 'auto', 'WORKER_TTR' => '4']);
        $manual = $this->startWorker(['WORKER_TOPICS' => 'manual', 'WORKER_TTR' => '4', 'WORKER_AUTO_TOUCH' => '0']);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'acked', 'id' => 'auto']) !== []
            && $this->events(['event' => 'ack_lost', 'id' => 'manual']) !== [], 'auto acked, manual expired');

        self::assertCount(1, $this->events(['event' => 'run', 'id' => 'auto']));
        self::assertGreaterThanOrEqual(2, \count($this->events(['event' => 'touched', 'id' => 'auto'])));
        self::assertSame([], $this->events(['event' => 'ack_lost', 'id' => 'auto']));
        // without touches the reservation ran out while the handler ran: the job came back
        self::assertSame([], $this->events(['event' => 'touched', 'id' => 'manual']));
        self::assertSame('ttr expired', $this->redis()->hGet('delayer:job_bucket:manual', 'last_error'));
        $this->signal($auto, SIGTERM);
        $this->signal($manual, SIGKILL);
        self::assertSame(0, $this->waitForExit($auto));
    }

    public function testSigtermLetsTheRunningHandlerFinishAndTakesNoMoreJobs(): void
    {
        $this->push([Message::create('slow', 'mail', 'sleep:2')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail']);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'run', 'id' => 'slow']) !== [], 'the slow job runs');
        $this->push([Message::create('next1', 'mail', 'ok'), Message::create('next2', 'mail', 'ok')]);
        $this->waitUntil(fn (): bool => $this->redis()->lLen('delayer:ready_queue:mail') === 2, 'two more jobs ready');

        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
        self::assertNotSame([], $this->events(['event' => 'done', 'id' => 'slow']), 'the handler finished');
        self::assertNotSame([], $this->events(['event' => 'acked', 'id' => 'slow']), 'and its job was acked');
        self::assertSame(0, $this->redis()->exists('delayer:job_bucket:slow'));
        self::assertSame(2, $this->redis()->lLen('delayer:ready_queue:mail'), 'no job was taken after the signal');
        self::assertSame(0, $this->redis()->zCard('delayer:reserved'));
        self::assertSame(1, \count($this->events(['event' => 'exit'])), 'run() returned');
    }

    public function testAnIdleWorkerStopsOnSigint(): void
    {
        $pid = $this->startWorker(['WORKER_TOPICS' => 'a,b,c']);
        $this->signal($pid, SIGINT);
        self::assertSame(0, $this->waitForExit($pid, 10.0));
        self::assertSame([SIGINT], array_column($this->events(['event' => 'stopping']), 'signal'));
    }

    public function testAHandlerPastTheGracePeriodIsInterruptedAndItsJobReleased(): void
    {
        $this->push([Message::create('stuck', 'mail', 'sleep:120')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail', 'WORKER_GRACE' => '1']);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'run', 'id' => 'stuck']) !== [], 'the job runs');
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid, 20.0));

        self::assertSame([], $this->events(['event' => 'done']));
        // The stop's doing, not the handler's failure (the same event in every SDK).
        self::assertSame([], $this->events(['event' => 'job_failed', 'id' => 'stuck']));
        self::assertCount(1, $this->events(['event' => 'released_at_stop', 'id' => 'stuck']));
        // Released due now: still in the pool, or already moved on by the
        // harness's tick (waitForExit moves due jobs while it waits).
        $waiting = $this->redis()->zScore('delayer:job_pool', 'stuck');
        $ready = $this->redis()->lRange('delayer:ready_queue:mail', 0, -1);
        self::assertTrue(\is_float($waiting) || $ready === ['stuck'], 'released: in the pool or ready again');
        self::assertSame(0, $this->redis()->zCard('delayer:reserved'));
        self::assertSame(Worker::STOPPED, $this->redis()->hGet('delayer:job_bucket:stuck', 'last_error'));
    }

    public function testTheWorkerRidesOutARedisRestart(): void
    {
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail']);
        $this->push([Message::create('before', 'mail', 'ok')]);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'acked', 'id' => 'before']) !== [], 'the first job acked');

        $this->server->kill();
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'connection_lost'])) >= 3, 'the worker saw Redis go');
        $this->server->restart();
        $this->push([Message::create('after', 'mail', 'ok')]);
        $this->waitUntil(fn (): bool => $this->events(['event' => 'acked', 'id' => 'after']) !== [], 'a job acked after the restart');
        self::assertTrue($this->running($pid));
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }

    public function testTopicsTakeTurns(): void
    {
        $jobs = [];
        for ($i = 0; $i < 6; $i++) {
            $jobs[] = Message::create("a{$i}", 'a', 'ok');
            $jobs[] = Message::create("b{$i}", 'b', 'ok');
            $jobs[] = Message::create("c{$i}", 'c', 'ok');
        }
        $this->push($jobs);
        $this->waitUntil(fn (): bool => $this->redis()->zCard('delayer:job_pool') === 0, 'all ready');
        $pid = $this->startWorker(['WORKER_TOPICS' => 'a,b,c']);
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'acked'])) === 18, 'all acked');
        $topics = implode('', array_column($this->events(['event' => 'run']), 'topic'));
        self::assertSame(str_repeat('abc', 6), $topics, 'one job of each topic in turn');
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }
}
