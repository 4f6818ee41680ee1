<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Message;
use Delayer\ReservedMessage;

/**
 * Consumers obey a topic's flow control (issue 23, slice 1;
 * docs/design/flow-control.md §3), in both layouts, on a real redis-server:
 * the pause and the resume go through the client's pause() and resume()
 * (flow.lua), except in one case where the pause is written by hand, as
 * flow.lua writes it (`HSET <flow> paused <time>`), together with the ids
 * landing in the ready list. A paused topic hands out nothing and leaves
 * its ready list as it was; a wait blocks on the gate and ends at the resume.
 */
final class FlowTest extends RedisTestCase
{
    use BlockedChild;

    private const P = 'fl:';

    private string $layout = 'classic';

    private Client $flowClient;

    /** @return iterable<string, array{string}> */
    public static function layouts(): iterable
    {
        yield 'classic' => ['classic'];
        yield 'topic' => ['topic'];
    }

    /** The protocol's names, written out here on purpose (not the SDK's). */
    private function key(string $kind, string $topic = 't'): string
    {
        if ($this->layout === 'topic') {
            return self::P . '{' . $topic . '}:' . $kind;
        }
        return self::P . [
            'ready' => "ready_queue:{$topic}", 'flow' => "flow:{$topic}", 'gate' => "flow_gate:{$topic}",
            'pool' => 'job_pool', 'reserved' => 'reserved', 'job:' => 'job_bucket:',
        ][$kind];
    }

    private function flowClient(string $layout): Client
    {
        $this->layout = $layout;
        return $this->flowClient = $this->client(['layout' => $layout, 'prefix' => self::P]);
    }

    /** Jobs of topic t made ready by hand (as the server's move would), in this order. */
    private function ready(Client $client, string ...$ids): void
    {
        foreach ($ids as $id) {
            $client->pushTo('t', $id, 3600, "body {$id}");
            $this->redis->multi()->zRem($this->key('pool'), $id)->lPush($this->key('ready'), $id)->exec();
        }
    }

    private function pause(): void
    {
        self::assertTrue($this->flowClient->pause('t'));
    }

    private function resume(): void
    {
        self::assertTrue($this->flowClient->resume('t'));
    }

    /** @dataProvider layouts */
    public function testNothingIsHandedOutWhilePaused(string $layout): void
    {
        $client = $this->flowClient($layout);
        $this->ready($client, 'held', 'a', 'b', 'c');
        $held = $client->reserve('t', 30); // reserved before the pause: its ack must still pass
        $this->pause();
        $this->redis->rPush($this->key('gate'), '1'); // a stale gate: a paused reply deletes it
        $before = $this->redis->lRange($this->key('ready'), 0, -1);

        self::assertFalse($client->pop('t'));
        self::assertSame(0, $this->redis->exists($this->key('gate')), 'the gate is gone while paused');
        self::assertFalse($client->reserve('t', 30));
        self::assertSame([[true], []], $client->reserveMany('t', 30, 5, [$held]), 'acks pass, no job');
        self::assertSame($before, $this->redis->lRange($this->key('ready'), 0, -1), 'the ready list untouched');
        self::assertSame(0, $this->redis->zCard($this->key('reserved')));

        $this->resume();
        self::assertSame('a', $client->pop('t')->id, 'first due, first out');
        self::assertSame('b', $client->reserve('t', 30)->id);
        self::assertSame(['c'], array_map(static fn (ReservedMessage $j): string => $j->id, $client->reserveMany('t', 30, 5)[1]));
    }

    /** @dataProvider layouts */
    public function testAWaitBlocksOnTheGateAndEndsAtTheResume(string $layout): void
    {
        $client = $this->flowClient($layout);
        $waits = [
            'bPop' => static fn (): Message|false => $client->bPop('t', 10),
            'bReserve, forever' => static fn (): ReservedMessage|false => $client->bReserve('t', 30, 0),
        ];
        foreach ($waits as $name => $wait) {
            $this->ready($client, $name);
            $this->pause();
            // blocked on the gate: a second later the job is still ready and nothing reserved, then the resume
            $child = $this->whenBlocked(
                ['SLEEP', 1.0],
                ['EXPECT', [$name], 'LRANGE', $this->key('ready'), '0', '-1'],
                ['EXPECT', 0, 'ZCARD', $this->key('reserved')],
                ['CLIENT', true, ['layout' => $layout, 'prefix' => self::P], 'resume', 't'],
            );
            $start = microtime(true);
            $job = $wait();
            $end = microtime(true);
            [$code, $resumedAt] = $this->waitForChild($child);
            self::assertSame(0, $code, "{$name}: the helper saw it blocked, the job still ready, then resumed");
            self::assertSame($name, $job->id);
            self::assertGreaterThan(1.0, $end - $start, $name);
            self::assertLessThan(2.0, $end - $resumedAt, "{$name}: woken by the gate, not by the 5 s recheck");
        }
    }

    /** @dataProvider layouts */
    public function testAPausedWaitMakesAFewCallsAndRechecks(string $layout): void
    {
        $client = $this->flowClient($layout);
        $this->ready($client, 'a');
        $this->pause();
        $client->pop('t'); // the script loaded, the gate deleted
        $monitor = new Monitor(RedisServer::shared()->port, self::addressOf($this->redis));
        try {
            $start = microtime(true);
            self::assertFalse($client->bPop('t', 5.5));
            $elapsed = microtime(true) - $start;
            // claim, the gate for the 5 s recheck, claim, the gate for what is left
            self::assertSame(['EVALSHA', 'BRPOPLPUSH', 'EVALSHA', 'BRPOPLPUSH'], $monitor->commandsUntilMarker($this->redis, 'paused'));
            self::assertGreaterThanOrEqual(5.5, $elapsed);
            self::assertLessThan(7.0, $elapsed);
        } finally {
            $monitor->close();
        }
        self::assertSame(['a'], $this->redis->lRange($this->key('ready'), 0, -1));
    }

    /** @dataProvider layouts */
    public function testAPauseLandingOnABlockedBpopPutsTheIdBack(string $layout): void
    {
        $client = $this->flowClient($layout);
        foreach (['a', 'b'] as $id) {
            $client->pushTo('t', $id, 3600, "body {$id}");
        }
        // bPop blocks in BRPOP on the empty list; the pause (by hand, as flow.lua's HSET) and two ids land at once, BRPOP takes "a"
        $child = $this->whenBlocked(
            ['EVAL', "redis.call('HSET', KEYS[1], 'paused', '1.000') redis.call('ZREM', KEYS[2], 'a', 'b') "
                . "redis.call('LPUSH', KEYS[3], 'a', 'b')", '3', $this->key('flow'), $this->key('pool'), $this->key('ready')],
        );
        self::assertFalse($client->bPop('t', 1.5));
        self::assertSame(0, $this->waitForChild($child)[0]);
        self::assertSame(['b', 'a'], $this->redis->lRange($this->key('ready'), 0, -1), 'back at the right end, first out');
        self::assertSame(2, $this->redis->exists($this->key('job:') . 'a', $this->key('job:') . 'b'), 'nothing handed out');
        $this->resume();
        self::assertSame(['a', 'b'], [$client->bPop('t', 1)->id, $client->pop('t')->id]);
    }

    private static function addressOf(\Redis $redis): string
    {
        preg_match('/addr=(\S+)/', (string) $redis->rawCommand('CLIENT', 'INFO'), $m);
        return $m[1];
    }
}
