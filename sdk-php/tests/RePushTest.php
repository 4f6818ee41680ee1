<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Message;
use Delayer\ReservedMessage;

/**
 * A job never reaches a consumer before its due time, even when its id was
 * pushed before and a ready-queue entry or a reservation of the earlier push
 * is still around (issue 10, item 2): the entry is stale, every consumer
 * drops it, and the newer job waits for its own due time. Re-pushes by this
 * SDK and by Delayer 1.x's client (which merges into the old bucket).
 */
final class RePushTest extends RedisTestCase
{
    /** @return iterable<string, array{\Closure(Client): (Message|ReservedMessage|false)}> */
    public static function consumers(): iterable
    {
        yield 'pop' => [static fn (Client $c) => $c->pop('t')];
        yield 'bPop' => [static fn (Client $c) => $c->bPop('t', 0.3)];
        yield 'reserve' => [static fn (Client $c) => $c->reserve('t', 30)];
        yield 'bReserve' => [static fn (Client $c) => $c->bReserve('t', 30, 0.3)];
    }

    /** @return iterable<string, array{\Closure(Client): (Message|ReservedMessage|false), bool}> */
    public static function consumersAndWriters(): iterable
    {
        foreach (self::consumers() as $name => [$consume]) {
            yield "{$name}, re-pushed by this SDK" => [$consume, false];
            yield "{$name}, re-pushed the Delayer 1.x way" => [$consume, true];
        }
    }

    /**
     * @dataProvider consumersAndWriters
     * @param \Closure(Client): (Message|ReservedMessage|false) $consume
     */
    public function testAReadyEntryOfAnEarlierPushDoesNotCarryTheNewJobOutEarly(\Closure $consume, bool $legacy): void
    {
        $client = $this->client();
        $client->pushTo('t', 'X', 0, 'first');
        $this->moveDue(1);
        self::assertSame(['X'], $this->redis->lRange('delayer:ready_queue:t', 0, -1));

        $this->rePush($client, 'X', 100, 'second', $legacy);
        self::assertFalse($consume($client), 'the second job is due in 100 s');
        self::assertSame([], $this->redis->lRange('delayer:ready_queue:t', 0, -1), 'the stale entry is dropped');
        self::assertSame('second', $this->redis->hGet('delayer:job_bucket:X', 'body'), 'the new job is kept');
        self::assertNotFalse($this->redis->zScore('delayer:job_pool', 'X'), 'and still waits');
        self::assertFalse($this->redis->zScore('delayer:reserved', 'X'));

        // once due, it is delivered, once
        $client->reschedule('X', 0);
        $this->moveDue(1);
        $job = $consume($client);
        self::assertNotFalse($job);
        self::assertSame(['X', 'second'], [$job->id, $job->body]);
        self::assertFalse($client->pop('t'));
    }

    /** @dataProvider consumers */
    public function testAnEntryForAReservedIdIsNotHandedOutAgain(\Closure $consume): void
    {
        $client = $this->client();
        $client->pushTo('t', 'R', 0, 'body');
        $this->moveDue(1);
        $held = $client->reserve('t', 60);
        self::assertInstanceOf(ReservedMessage::class, $held);
        $this->redis->lPush('delayer:ready_queue:t', 'R'); // a duplicate entry (an old write, a 1.x move)
        self::assertFalse($consume($client), 'the job is reserved: nobody else gets it');
        self::assertTrue($client->ack($held), 'the reservation is still held');
    }

    /** @return iterable<string, array{bool}> */
    public static function writers(): iterable
    {
        yield 're-pushed by this SDK' => [false];
        yield 're-pushed the Delayer 1.x way' => [true];
    }

    /** @dataProvider writers */
    public function testAReservationOfAnEarlierPushIsNoLongerHeld(bool $legacy): void
    {
        $client = $this->client();
        $client->pushTo('t', 'Y', 0, 'first');
        $this->moveDue(1);
        $old = $client->reserve('t', 60);
        self::assertInstanceOf(ReservedMessage::class, $old);

        $this->rePush($client, 'Y', 100, 'second', $legacy);
        self::assertFalse($client->touch($old, 60), 'touch: the reservation is stale');
        self::assertFalse($client->touch('Y', 60), 'touch without a receipt');
        self::assertFalse($client->release($old, 0), 'release would make the new job due now');
        self::assertFalse($client->bury($old));
        self::assertFalse($client->ack($old), 'ack would delete the new job');
        self::assertFalse($client->ack('Y'));
        self::assertSame('second', $this->redis->hGet('delayer:job_bucket:Y', 'body'));
        $due = $this->redis->zScore('delayer:job_pool', 'Y');
        self::assertGreaterThan($this->redisTime() + 90, $due, 'still due in about 100 s');
        self::assertFalse($client->pop('t'));
    }

    /** push() of this SDK, or exactly what mix/delayer-client's push() sent (whole seconds, merged bucket). */
    private function rePush(Client $client, string $id, int $delay, string $body, bool $legacy): void
    {
        if (!$legacy) {
            $client->pushTo('t', $id, $delay, $body);
            return;
        }
        $now = (int) $this->redis->time()[0];
        $this->redis->multi();
        $this->redis->hMSet("delayer:job_bucket:{$id}", ['topic' => 't', 'body' => $body]);
        $this->redis->expire("delayer:job_bucket:{$id}", $delay + 604800);
        $this->redis->zAdd('delayer:job_pool', $now + $delay, $id);
        $this->redis->exec();
    }
}
