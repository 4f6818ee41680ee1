<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\DelayerException;
use Delayer\Exception\IdTakenException;
use Delayer\Message;
use Delayer\ScheduledMessage;
use Delayer\Taken;

/**
 * Ids are global across topics (the 1.x key layout). push() and pushMany()
 * replace a taken id's job by default, as Delayer 1.x did; with
 * `ifAbsent: true` they leave it alone and say who holds the id
 * (issue 10, item 3).
 */
final class IfAbsentTest extends RedisTestCase
{
    public function testByDefaultAnIdOfAnotherTopicIsReplaced(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('42', 'close_order', 'order'), 60);
        self::assertTrue($client->schedule(Message::create('42', 'sms', 'text'), 30));
        self::assertSame(['topic' => 'sms', 'body' => 'text'], $this->redis->hGetAll('delayer:job_bucket:42'));
        self::assertSame(1, $this->redis->zCard('delayer:job_pool'), 'one job per id: the close_order job is gone');
    }

    public function testIfAbsentWritesAFreeId(): void
    {
        $client = $this->client();
        self::assertTrue($client->schedule(Message::create('free', 't', 'b'), 5, ifAbsent: true));
        self::assertTrue($client->pushTo('t', 'free2', 5, 'b2', ifAbsent: true));
        self::assertSame(['topic' => 't', 'body' => 'b2'], $this->redis->hGetAll('delayer:job_bucket:free2'));
        self::assertSame(2, $this->redis->zCard('delayer:job_pool'));
    }

    public function testIfAbsentLeavesAWaitingJobAloneAndNamesIt(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('42', 'close_order', 'order'), 60);
        $due = $this->redis->zScore('delayer:job_pool', '42');
        $ttl = $this->redis->pTtl('delayer:job_bucket:42');
        try {
            $client->schedule(Message::create('42', 'sms', 'text'), 1, ifAbsent: true);
            self::fail('expected IdTakenException');
        } catch (IdTakenException $e) {
            self::assertInstanceOf(DelayerException::class, $e);
            self::assertEquals([new Taken('42', 'close_order', $due)], $e->taken);
            self::assertSame([null], $e->dues);
            self::assertSame(sprintf('id taken: "42" (topic close_order, due %.3F)', $due), $e->getMessage());
        }
        self::assertSame(['topic' => 'close_order', 'body' => 'order'], $this->redis->hGetAll('delayer:job_bucket:42'));
        self::assertSame($due, $this->redis->zScore('delayer:job_pool', '42'));
        self::assertLessThanOrEqual($ttl, $this->redis->pTtl('delayer:job_bucket:42'), 'expiry untouched');
    }

    public function testATakenIdThatIsNotWaitingHasNoDueTime(): void
    {
        $client = $this->client();
        $client->pushTo('t', 'reserved', 0);
        $client->pushTo('t', 'ready', 0.002);
        $this->moveDue(2);
        self::assertSame('reserved', $client->reserve('t', 60)->id, 'first due, first out');
        foreach (['ready', 'reserved'] as $id) {
            try {
                $client->pushTo('other', $id, 10, ifAbsent: true);
                self::fail('expected IdTakenException');
            } catch (IdTakenException $e) {
                self::assertEquals([new Taken($id, 't', null)], $e->taken);
                self::assertSame("id taken: \"{$id}\" (topic t, not waiting)", $e->getMessage());
            }
        }
        $this->redis->set('delayer:job_bucket:broken', 'not a hash');
        try {
            $client->pushTo('t', 'broken', 10, ifAbsent: true);
            self::fail('expected IdTakenException');
        } catch (IdTakenException $e) {
            self::assertEquals([new Taken('broken', '', null)], $e->taken, 'an unreadable job still holds its id');
        }
        self::assertSame('not a hash', $this->redis->get('delayer:job_bucket:broken'));
    }

    public function testPushManyIfAbsentWritesTheFreeIdsAndReportsTheTakenOnes(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('taken:waiting', 'a', 'old'), 100);
        $client->schedule(Message::create('taken:ready', 'b', 'old'), 0);
        $this->moveDue(1);
        $waitingDue = $this->redis->zScore('delayer:job_pool', 'taken:waiting');
        // 150 jobs: two push_many.lua calls; taken ids in both, and an id
        // repeated in the batch (its second job finds it taken by the first)
        $jobs = [];
        for ($i = 0; $i < 150; $i++) {
            $id = match ($i) {
                3 => 'taken:waiting',
                120 => 'taken:ready',
                140 => 'free:7',
                default => "free:{$i}",
            };
            $jobs[] = new ScheduledMessage(Message::create($id, 'new', "body-{$i}"), 10 + $i);
        }
        try {
            $client->pushMany($jobs, ifAbsent: true);
            self::fail('expected IdTakenException');
        } catch (IdTakenException $e) {
            $free7Due = $this->redis->zScore('delayer:job_pool', 'free:7');
            self::assertEquals(
                [new Taken('taken:waiting', 'a', $waitingDue), new Taken('taken:ready', 'b', null), new Taken('free:7', 'new', $free7Due)],
                $e->taken
            );
            self::assertSame('3 ids taken: "taken:waiting" (topic a, due ' . sprintf('%.3F', $waitingDue)
                . '), "taken:ready" (topic b, not waiting), "free:7" (topic new, due ' . sprintf('%.3F', $free7Due) . ')', $e->getMessage());
            self::assertCount(150, $e->dues);
            foreach ($jobs as $i => $job) {
                if (\in_array($i, [3, 120, 140], true)) {
                    self::assertNull($e->dues[$i], "job {$i} was not written");
                } else {
                    self::assertSame($this->redis->zScore('delayer:job_pool', $job->message->id), $e->dues[$i], "due time of job {$i}");
                    self::assertSame("body-{$i}", $this->redis->hGet('delayer:job_bucket:' . $job->message->id, 'body'));
                }
            }
        }
        self::assertSame('old', $this->redis->hGet('delayer:job_bucket:taken:waiting', 'body'));
        self::assertSame('old', $this->redis->hGet('delayer:job_bucket:taken:ready', 'body'));
        self::assertSame('body-7', $this->redis->hGet('delayer:job_bucket:free:7', 'body'), 'the first of a repeated id wins');
        self::assertSame($waitingDue, $this->redis->zScore('delayer:job_pool', 'taken:waiting'));
    }

    public function testPushManyIfAbsentWithoutTakenIdsReturnsTheCount(): void
    {
        $client = $this->client();
        self::assertSame(2, $client->pushMany([[Message::create('x', 't'), 1], [Message::create('y', 't'), 1]], ifAbsent: true));
        self::assertSame(2, $this->redis->zCard('delayer:job_pool'));
    }

    public function testPushManyByDefaultReplacesAcrossTopics(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('42', 'close_order', 'order'), 60);
        self::assertSame(1, $client->pushMany([[Message::create('42', 'sms', 'text'), 30]]));
        self::assertSame(['topic' => 'sms', 'body' => 'text'], $this->redis->hGetAll('delayer:job_bucket:42'));
    }

    public function testManyTakenIdsAreCountedInTheMessage(): void
    {
        $client = $this->client();
        $jobs = [];
        for ($i = 0; $i < 5; $i++) {
            $jobs[] = [Message::create("d:{$i}", 't'), 50];
        }
        $client->pushMany($jobs);
        try {
            $client->pushMany($jobs, ifAbsent: true);
            self::fail('expected IdTakenException');
        } catch (IdTakenException $e) {
            self::assertCount(5, $e->taken);
            self::assertSame([null, null, null, null, null], $e->dues);
            self::assertStringStartsWith('5 ids taken: "d:0" (topic t, due ', $e->getMessage());
            self::assertStringEndsWith(') and 2 more', $e->getMessage());
        }
    }

    public function testIfAbsentStillChecksItsInput(): void
    {
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->pushTo('t', '', 1, ifAbsent: true));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->schedule(Message::create('id', 't'), -1, ifAbsent: true));
    }
}
