<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Message;

/** The Worker hands each handler its job's traceparent (issue 22), at least and at most once. */
final class TraceWorkerTest extends WorkerHarness
{
    private const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

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
    public function testHandlersGetTheTraceparent(string $mode): void
    {
        $this->push([Message::create('w1', 'mail', 'ok')->withTraceparent(self::TP), Message::create('w2', 'mail', 'ok')]);
        $pid = $this->startWorker(['WORKER_TOPICS' => 'mail', 'WORKER_MODE' => $mode]);
        $this->waitUntil(fn (): bool => \count($this->events(['event' => 'run'])) === 2, 'both jobs ran');
        $seen = array_map(static fn (array $e): array => [$e['id'], $e['traceparent']], $this->events(['event' => 'run']));
        sort($seen);
        self::assertSame([['w1', self::TP], ['w2', null]], $seen);
        $this->signal($pid, SIGTERM);
        self::assertSame(0, $this->waitForExit($pid));
    }
}
