<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Message;

/**
 * A Worker on a paused topic (docs/design/flow-control.md §3.3): its idle
 * waits go through bReserve / bPop, which wait on the topic's gate, so it
 * starts no job and costs Redis what an idle Worker costs; after the resume
 * it runs every job once. The pause and resume are the client's (flow.lua).
 */
final class FlowWorkerTest extends WorkerHarness
{
    protected function setUp(): void
    {
        parent::setUp();
        $this->startRedis();
    }

    /** @return iterable<string, array{string}> */
    public static function modes(): iterable
    {
        yield 'at least once' => ['at-least-once'];
        yield 'at most once' => ['at-most-once'];
    }

    /** @dataProvider modes */
    public function testAPausedTopicStartsNoJobUntilResumed(string $mode): void
    {
        $redis = $this->redis();
        self::assertTrue($this->client()->pause('mail'));
        $this->push([Message::create('a', 'mail', 'ok'), Message::create('b', 'mail', 'ok'), Message::create('c', 'mail', 'ok')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail', 'WORKER_MODE' => $mode]);
        $this->waitUntil(fn (): bool => $redis->lLen('delayer:ready_queue:mail') === 3, 'the jobs are ready');

        // two seconds paused: a few calls per idle wait (0.2 s here), most of the time blocked on the gate
        $before = $this->clientCalls();
        usleep(2000000);
        $calls = $this->clientCalls();
        foreach ($calls as $command => $n) {
            $calls[$command] = $n - ($before[$command] ?? 0);
        }
        self::assertGreaterThanOrEqual(3, $calls['brpoplpush'] ?? 0, 'it waits on the gate');
        self::assertLessThan(40, array_sum($calls), 'three calls per idle wait, no busy loop');
        self::assertSame([], $this->events(['event' => 'job_started']));
        self::assertSame(3, $redis->lLen('delayer:ready_queue:mail'));

        self::assertTrue($this->client()->resume('mail'));
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'job_succeeded'])) === 3, 'every job ran', 10.0);
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
        $ran = array_column($this->events(['event' => 'job_started']), 'id');
        sort($ran);
        self::assertSame(['a', 'b', 'c'], $ran, 'each once');
        self::assertSame(0, $redis->exists('delayer:job_bucket:a', 'delayer:job_bucket:b', 'delayer:job_bucket:c', 'delayer:reserved'));
    }

    public function testAnIdleWorkerClaimsOncePerWait(): void
    {
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail']);
        $this->waitUntil(fn (): bool => ($this->clientCalls()['blmove'] ?? 0) >= 2, 'it waits');
        $before = $this->clientCalls();
        usleep(2000000);
        $calls = $this->clientCalls();
        $waits = ($calls['blmove'] ?? 0) - ($before['blmove'] ?? 0);
        $scripts = ($calls['evalsha'] ?? 0) - ($before['evalsha'] ?? 0);
        self::assertGreaterThanOrEqual(3, $waits);
        // the round's reserveMany, then the wait's BLMOVE: its bReserve does not claim the topic again first
        self::assertLessThanOrEqual($waits + 1, $scripts, "{$scripts} script calls for {$waits} waits");
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }

    /** @return array<string, int> calls per command sent by clients (INFO commandstats; a script's own calls are under their names too) */
    private function clientCalls(): array
    {
        $calls = [];
        foreach ($this->redis()->info('commandstats') as $name => $line) {
            $command = substr((string) $name, \strlen('cmdstat_'));
            if (\in_array($command, ['evalsha', 'eval', 'brpoplpush', 'brpop', 'blmove'], true)) {
                $calls[$command] = (int) explode('=', explode(',', (string) $line)[0])[1];
            }
        }
        return $calls;
    }
}
