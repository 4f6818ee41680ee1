<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\InvalidArgumentException;
use Delayer\JobInfo;
use Delayer\Listed;
use Delayer\Message;
use Delayer\Page;
use Delayer\Validator;

/**
 * Job lookup, listings and per-topic numbers (issue 13) against a real
 * redis-server; moves run the repository's move.lua.
 */
final class InspectTest extends RedisTestCase
{
    /** @return array{0: int, 1: int, 2: int|null, 3: int} */
    private static function numbers(Client $client, string $topic): array
    {
        foreach ($client->stats()->topics as $t) {
            if ($t->topic === $topic) {
                return [$t->scheduled, $t->ready, $t->reserved, $t->dead];
            }
        }
        self::fail("no topic {$topic}");
    }

    public function testOneJobThroughItsWholeLife(): void
    {
        $client = $this->client();
        self::assertSame('unknown', $client->job('t', 'a')->state);
        $due = $client->schedule(Message::create('a', 't', 'hello')->withMaxAttempts(3), 60);
        $info = $client->job('t', 'a');
        self::assertEquals(new JobInfo('a', 'scheduled', 't', 5, 0, 3, $info->due, null, null, null, null), $info);
        self::assertEqualsWithDelta($this->redis->zScore('delayer:job_pool', 'a'), $info->due, 0.0005);
        self::assertSame('unknown', $client->job('other', 'a')->state, 'a job of another topic is not shown');
        self::assertSame([1, 0, 0, 0], self::numbers($client, 't'));

        $client->reschedule('a', 0);
        $this->moveDue(1);
        self::assertSame('ready', $client->job('t', 'a')->state);
        self::assertSame([0, 1, 0, 0], self::numbers($client, 't'));

        $job = $client->reserve('t', 30);
        self::assertNotFalse($job);
        $info = $client->job('t', 'a');
        self::assertSame(['reserved', 1], [$info->state, $info->attempts]);
        self::assertEqualsWithDelta($job->deadline, $info->deadline, 0.0005);
        self::assertSame([0, 0, 1, 0], self::numbers($client, 't'));

        self::assertTrue($client->bury($job, null, 'RuntimeException: no such order'));
        $info = $client->job('t', 'a');
        self::assertSame(['dead', 'buried', 'RuntimeException: no such order'], [$info->state, $info->deadReason, $info->lastError]);
        self::assertNotNull($info->deadAt);
        self::assertSame([0, 0, 0, 1], self::numbers($client, 't'));

        self::assertSame(1, $client->requeueDead('t', ['a']));
        $info = $client->job('t', 'a');
        self::assertSame(['scheduled', 0, null], [$info->state, $info->attempts, $info->deadReason]);
        self::assertSame([1, 0, 0, 0], self::numbers($client, 't'));
        unset($due);
    }

    public function testMalformedAndBadArguments(): void
    {
        $client = $this->client();
        $this->redis->hSet('delayer:job_bucket:h', 'body', 'x');
        $this->redis->set('delayer:job_bucket:s', 'x');
        self::assertSame('malformed', $client->job('t', 'h')->state);
        self::assertSame('malformed', $client->job('t', 's')->state);
        foreach ([
            static fn () => $client->job('', 'a'),
            static fn () => $client->job('t', ''),
            static fn () => $client->listReady('t', 0, 0),
            static fn () => $client->listScheduled('t', -1, 5),
            static fn () => $client->listReserved('t', 0, 1001),
        ] as $n => $bad) {
            try {
                $bad();
                self::fail("case {$n} was accepted");
            } catch (InvalidArgumentException) {
                self::assertSame(0, $this->redis->exists('delayer:job_pool'));
            }
        }
    }

    public function testListingPositionsPastTheBoundAreRefused(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('a', 't', 'x'), 60);
        $past = Validator::MAX_POSITION + 1;
        foreach ([$past, PHP_INT_MAX] as $position) {
            foreach ([
                static fn () => $client->listScheduled('t', $position, 10),
                static fn () => $client->listReserved('t', $position, 10),
                static fn () => $client->listReady('t', $position, 10),
                static fn () => $client->deadLetters('t', $position, 10),
            ] as $n => $bad) {
                try {
                    $bad();
                    self::fail("case {$n} took {$position}");
                } catch (InvalidArgumentException $e) {
                    self::assertStringContainsString((string) Validator::MAX_POSITION, $e->getMessage());
                }
            }
        }
        self::assertSame([], $client->listScheduled('t', Validator::MAX_POSITION, 10)->items);
        self::assertSame([], $client->deadLetters('t', Validator::MAX_POSITION, 10));
    }

    public function testListingsPageThroughATopic(): void
    {
        $client = $this->client();
        for ($i = 0; $i < 25; $i++) {
            $client->pushTo('x', sprintf('x%02d', $i), 100 + $i);
            $client->pushTo('y', sprintf('y%02d', $i), 100 + $i);
        }
        $seen = [];
        $cursor = 0;
        do {
            $page = $client->listScheduled('x', $cursor, 10);
            self::assertLessThanOrEqual(10, \count($page->items));
            $seen = array_merge($seen, $page->items);
            $cursor = $page->next;
        } while ($cursor !== null);
        self::assertSame(array_map(static fn ($i) => sprintf('x%02d', $i), range(0, 24)), array_map(static fn (Listed $l) => $l->id, $seen));

        for ($i = 0; $i < 5; $i++) {
            $this->redis->lPush('delayer:ready_queue:r', "r{$i}");
        }
        self::assertEquals(new Page(['r0', 'r1', 'r2'], 3), $client->listReady('r', 0, 3));
        self::assertEquals(new Page(['r3', 'r4'], null), $client->listReady('r', 3, 3));

        $client->pushTo('q', 'q1', 0);
        $client->pushTo('q', 'q2', 0);
        $this->moveDue(2);
        $first = $client->reserve('q', 60);
        $second = $client->reserve('q', 30);
        self::assertNotFalse($first);
        self::assertNotFalse($second);
        $page = $client->listReserved('q');
        self::assertSame([$second->id, $first->id], array_map(static fn (Listed $l) => $l->id, $page->items));
        self::assertNull($page->next);
    }

    public function testCountsFollowReplaceAndRemove(): void
    {
        $client = $this->client();
        $client->pushTo('a', '1', 60);
        $client->pushTo('a', '2', 60);
        $client->pushTo('b', '2', 60);
        $stats = $client->stats();
        self::assertSame(2, $stats->scheduledTotal);
        self::assertSame([['a', 1], ['b', 1]], array_map(static fn ($t) => [$t->topic, $t->scheduled], $stats->topics));
        self::assertTrue($client->remove('1'));
        self::assertTrue($client->remove('2'));
        self::assertSame(0, $this->redis->dbSize(), 'push then remove leaves nothing behind');
    }
}
