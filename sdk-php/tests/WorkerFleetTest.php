<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\Message;

/**
 * Issue 14's test of the Worker: 1,000 jobs over 3 worker processes, some
 * handlers failing, one worker killed with kill -9, one Redis restart (with
 * an append-only file, as a production Redis keeps its data): every job ends
 * acked or dead, none is lost, and none runs again after its ack.
 */
final class WorkerFleetTest extends WorkerHarness
{
    private const JOBS = 1000;

    public function testAThousandJobsOverThreeWorkersThroughKillAndRestart(): void
    {
        $this->startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
        $fast = Backoff::fixed(0.1);
        $jobs = [];
        $doomed = [];
        for ($i = 0; $i < self::JOBS; $i++) {
            $id = "job{$i}";
            $topic = $i % 2 === 0 ? 'even' : 'odd';
            if ($i % 50 === 7) {
                $jobs[] = Message::create($id, $topic, 'fail')->withMaxAttempts(2)->withBackoff($fast);
                $doomed[] = $id;
            } elseif ($i % 10 === 3) {
                $jobs[] = Message::create($id, $topic, 'fail-first sleep:0.01')->withBackoff($fast);
            } else {
                $jobs[] = Message::create($id, $topic, 'sleep:0.01')->withBackoff($fast);
            }
        }
        $this->push($jobs);
        $env = ['WORKER_TOPICS' => 'even,odd', 'WORKER_TTR' => '3'];
        $victim = $this->startWorker($env);
        $this->startWorker($env);
        $this->startWorker($env);

        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'done'])) >= 150, '150 jobs done');
        $this->signal($victim, SIGKILL);
        $this->waitForExit($victim);
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'done'])) >= 450, '450 jobs done');
        $this->server->restart();

        $ids = array_map(static fn (Message $m): string => $m->id, $jobs);
        $this->waitUntil(function () use ($ids): bool {
            $redis = $this->redis();
            return $redis->zCard('delayer:job_pool') === 0 && $redis->zCard('delayer:reserved') === 0
                && $redis->lLen('delayer:ready_queue:even') === 0 && $redis->lLen('delayer:ready_queue:odd') === 0
                && \count($ids) === \count(array_filter($ids, fn (string $id): bool => $this->settled($id)));
        }, 'every job acked or dead', 120.0);

        // dead: exactly the jobs that always fail, each with its error
        $dead = array_merge($this->redis()->lRange('delayer:dead:even', 0, -1), $this->redis()->lRange('delayer:dead:odd', 0, -1));
        sort($dead);
        $expected = $doomed;
        sort($expected);
        self::assertSame($expected, $dead);
        foreach ($doomed as $id) {
            self::assertSame("RuntimeException: boom {$id}", $this->redis()->hGet("delayer:job_bucket:{$id}", 'last_error'));
        }

        // acked, not lost: every other job's bucket is gone after a run that succeeded
        $done = array_flip(array_column($this->events(['event' => 'done']), 'id'));
        foreach ($ids as $id) {
            if (!\in_array($id, $doomed, true)) {
                self::assertSame(0, $this->redis()->exists("delayer:job_bucket:{$id}"), "{$id} is acked");
                self::assertArrayHasKey($id, $done, "{$id} ran to the end before it was deleted");
            }
        }

        // none ran again after its ack
        $ackedAt = [];
        foreach ($this->events(['event' => 'acked']) as $event) {
            $ackedAt[$event['id']] = min($ackedAt[$event['id']] ?? INF, $event['t']);
        }
        self::assertGreaterThan(self::JOBS / 2, \count($ackedAt), 'most acks were seen (a few replies may be lost in the restart)');
        foreach ($this->events(['event' => 'run']) as $run) {
            self::assertFalse(isset($ackedAt[$run['id']]) && $run['t'] > $ackedAt[$run['id']], "{$run['id']} ran again after its ack");
        }

        // what the test went through did happen
        self::assertNotSame([], $this->events(['event' => 'connection_lost']), 'the workers saw Redis restart');
        self::assertNotSame([], $this->events(['event' => 'run', 'pid' => $victim]));

        foreach (array_unique(array_column($this->events(['event' => 'started']), 'pid')) as $pid) {
            if ($pid !== $victim) {
                $this->signal($pid, SIGTERM);
                self::assertSame(0, $this->waitForExit($pid));
            }
        }
    }

    /** Acked (its bucket is gone) or dead (its bucket says so). */
    private function settled(string $id): bool
    {
        $bucket = $this->redis()->hMGet("delayer:job_bucket:{$id}", ['topic', 'dead_reason']);
        return $bucket['topic'] === false || $bucket['dead_reason'] !== false;
    }
}
