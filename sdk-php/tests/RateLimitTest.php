<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Connection;
use Delayer\Exception\DelayerException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\RedisErrorException;
use Delayer\RateLimit;
use Delayer\TopicStats;

/**
 * setRateLimit() and clearRateLimit() (flow.lua / flow_topic.lua's "limit" and
 * "unlimit", issue 23, slice 5) and what flow(), stats() and job() say of a
 * limited topic, in both layouts, on a real redis-server with no Delayer
 * server: the server's part (a classic move setting due ids aside in the flow
 * pool) is written by hand. The limit's rules are flow.lua's: here only that
 * its refusals arrive as InvalidArgumentException carrying its reason.
 */
final class RateLimitTest extends RedisTestCase
{
    private const P = 'rl:';

    private string $layout = 'classic';

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
        return self::P . ['flow' => "flow:{$topic}", 'flow_pool' => "flow_pool:{$topic}", 'pool' => 'job_pool'][$kind];
    }

    private function layoutClient(string $layout): Client
    {
        $this->layout = $layout;
        return $this->client(['layout' => $layout, 'prefix' => self::P]);
    }

    private static function topic(Client $client, string $topic): TopicStats
    {
        foreach ($client->stats()->topics as $t) {
            if ($t->topic === $topic) {
                return $t;
            }
        }
        self::fail("no topic {$topic} in stats");
    }

    /** @dataProvider layouts */
    public function testSetChangeReadAndClearALimit(string $layout): void
    {
        $client = $this->layoutClient($layout);
        self::assertNull($client->flow('t')->rateLimit, 'no limit until one is set');

        $state = $client->setRateLimit('t', 0.5);
        self::assertEquals(new RateLimit(0.5, 1), $state->rateLimit, 'the default burst: one second\'s worth, at least one job');
        self::assertTrue($state->changed);
        self::assertNull($state->pausedSince);
        self::assertEqualsWithDelta($this->redisTime(), $state->at, 1.0, 'Redis\'s clock');
        self::assertSame(['0.5', '1'], [$this->redis->hGet($this->key('flow'), 'per_second'), $this->redis->hGet($this->key('flow'), 'burst')]);
        self::assertFalse($client->setRateLimit('t', 0.5)->changed, 'the same limit again');
        self::assertFalse($client->setRateLimit('t', 0.5, 1)->changed, 'the default burst given');

        $state = $client->setRateLimit('t', 100, 20);
        self::assertEquals([new RateLimit(100.0, 20), true], [$state->rateLimit, $state->changed]);
        self::assertSame('100', $this->redis->hGet($this->key('flow'), 'per_second'), 'an int goes as one');
        self::assertEquals(new RateLimit(100.0, 20), $client->flow('t')->rateLimit);
        self::assertFalse($client->flow('t')->changed, 'get changes nothing');
        self::assertEquals(new RateLimit(1 / 3, 1), $client->setRateLimit('t', 1 / 3)->rateLimit, 'the same double back');
        self::assertNull($client->flow('u')->rateLimit, 'one topic only');

        self::assertTrue($client->clearRateLimit('t'));
        self::assertFalse($client->clearRateLimit('t'), 'no limit left');
        self::assertNull($client->flow('t')->rateLimit);
        self::assertFalse($client->clearRateLimit('never-limited'));
        foreach (['per_second', 'burst', 'tokens', 'tokens_at'] as $field) {
            self::assertFalse($this->redis->hExists($this->key('flow'), $field), "{$field} dropped");
        }
    }

    /** @dataProvider layouts */
    public function testAPauseAndALimitCombine(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pause('t');
        $state = $client->setRateLimit('t', 10);
        self::assertNotNull($state->pausedSince, 'the limit leaves the pause');
        self::assertEquals(new RateLimit(10.0, 10), $state->rateLimit);
        self::assertTrue($client->resume('t'));
        self::assertEquals(new RateLimit(10.0, 10), $client->flow('t')->rateLimit, 'the resume leaves the limit');
        $client->pause('t');
        self::assertTrue($client->clearRateLimit('t'));
        self::assertTrue($client->isPaused('t'), 'the clear leaves the pause');
    }

    /** @return iterable<string, array{int|float, int|null, string}> */
    public static function refused(): iterable
    {
        yield 'rate 0' => [0, null, 'a rate of 0 would stop the topic: pause it instead (pause(topic) / delayer pause <topic>)'];
        yield 'rate 0.0' => [0.0, null, 'a rate of 0 would stop the topic: pause it instead (pause(topic) / delayer pause <topic>)'];
        yield 'rate -1' => [-1, null, 'the rate must be more than 0 jobs per second, got -1'];
        yield 'rate NAN' => [NAN, null, 'the rate must be a finite number of jobs per second'];
        yield 'rate INF' => [INF, null, 'the rate must be a finite number of jobs per second'];
        yield 'rate 2e6' => [2e6, null, 'the rate must be at most 1000000 jobs per second, got 2000000'];
        yield 'rate below one a day' => [1e-5, null, 'the rate must be at least one job a day (1/86400 per second), got 1e-05'];
        yield 'burst 0' => [5, 0, 'the burst must be a whole number of jobs from 1 to 1000000, got "0"'];
        yield 'burst -1' => [5, -1, 'the burst must be a whole number of jobs from 1 to 1000000, got "-1"'];
        yield 'burst below 1% of the rate' => [1000, 9, 'the burst must be at least 1% of the rate per second (9 at 1000/s would cap the rate below it)'];
    }

    /**
     * The script refuses, the SDK says why (its InvalidArgumentException, the script's reason as the message), and
     * nothing is written: a limit already set stays.
     *
     * @dataProvider refused
     */
    public function testALimitTheScriptRefusesIsAnInvalidArgumentWithItsReason(int|float $rate, ?int $burst, string $why): void
    {
        foreach (['classic', 'topic'] as $layout) {
            $client = $this->layoutClient($layout);
            $this->redis->flushAll();
            $client->setRateLimit('t', 3, 4);
            $before = $this->redis->hGetAll($this->key('flow'));
            try {
                $client->setRateLimit('t', $rate, $burst);
                self::fail("{$layout}: expected InvalidArgumentException");
            } catch (InvalidArgumentException $e) {
                self::assertInstanceOf(DelayerException::class, $e);
                self::assertInstanceOf(\InvalidArgumentException::class, $e);
                self::assertSame($why, $e->getMessage(), $layout);
            }
            self::assertSame($before, $this->redis->hGetAll($this->key('flow')), "{$layout}: nothing written");
            self::assertEquals(new RateLimit(3.0, 4), $client->flow('t')->rateLimit);
        }
    }

    /** The mapping is the connection's, for any script's refusal; other script errors stay Redis errors. */
    public function testAnyScriptsInvalidArgumentErrorIsTheSdksInvalidArgument(): void
    {
        $connection = Connection::to('127.0.0.1', RedisServer::shared()->port, null, null, null, 2.0, []);
        try {
            $connection->commands([['EVAL', ["return redis.error_reply('ERR invalid argument: because \"x\" is wrong')", '0']]]);
            self::fail('expected InvalidArgumentException');
        } catch (InvalidArgumentException $e) {
            self::assertSame('because "x" is wrong', $e->getMessage());
        }
        try {
            $connection->commands([['EVAL', ["return redis.error_reply('ERR invalid arguments here')", '0']]]);
            self::fail('expected RedisErrorException');
        } catch (RedisErrorException $e) {
            self::assertStringContainsString('ERR invalid arguments here', $e->getMessage());
        }
        $connection->close();
    }

    /** @dataProvider layouts */
    public function testABadTopicOrTypeIsRefusedBeforeRedis(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $this->assertRejectedBeforeRedis(fn (Client $c) => $c->setRateLimit('', 5), $client);
        $this->assertRejectedBeforeRedis(fn (Client $c) => $c->clearRateLimit(''), $client);
        if ($layout === 'topic') {
            $this->assertRejectedBeforeRedis(fn (Client $c) => $c->setRateLimit('a{b}', 5), $client);
        }
        $this->expectException(\TypeError::class);
        $client->setRateLimit('t', '5'); // @phpstan-ignore-line: a string is a type error (strict_types here)
    }

    /** @dataProvider layouts */
    public function testStatsAndFlowSayTheLimitAndWhatItHolds(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pushTo('t', 'a', 0);
        $client->pushTo('t', 'b', 0);
        $client->pushTo('t', 'later', 3600);
        $client->pushTo('u', 'x', 0);
        $client->setRateLimit('t', 2, 3);
        if ($layout === 'classic') {
            // a classic server sets a limited topic's due ids aside in its flow pool (move_flow.lua)
            foreach (['a', 'b'] as $i => $id) {
                $this->redis->multi()->zRem($this->key('pool'), $id)->zAdd($this->key('flow_pool'), $i + 1.0, $id)->exec();
            }
        } else {
            $this->redis->sAdd(self::P . 'topics', 't', 'u'); // as the server writes it from the announcements
            usleep(20000); // due by Redis's ms: by this client's clock too
        }
        self::assertSame(2, $client->flow('t')->held, 'the due ones, not the later one nor another topic\'s');
        $t = self::topic($client, 't');
        self::assertEquals([false, null, 2, new RateLimit(2.0, 3)], [$t->paused, $t->pausedSince, $t->held, $t->rateLimit]);
        $u = self::topic($client, 'u');
        self::assertEquals([0, null], [$u->held, $u->rateLimit], 'a running topic without a limit');

        $client->clearRateLimit('t');
        // the classic server puts the set-aside ids back (move_flow.lua): until then the flow pool holds them
        self::assertSame($layout === 'classic' ? 2 : 0, $client->flow('t')->held);
        self::assertEquals([$layout === 'classic' ? 2 : 0, null], [self::topic($client, 't')->held, self::topic($client, 't')->rateLimit]);
    }

    public function testAClassicLimitListsTheTopicForTheServerAndInStats(): void
    {
        $client = $this->layoutClient('classic');
        $client->setRateLimit('idle', 1);
        self::assertSame(['idle'], $this->redis->sMembers(self::P . 'flow_topics'));
        self::assertEquals([new TopicStats('idle', 0, 0, 0, 0, false, null, 0, new RateLimit(1.0, 1))], $client->stats()->topics);
    }

    /** @dataProvider layouts */
    public function testLookupSaysTheJobsTopicIsLimitedAndAPauseWins(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pushTo('t', 'a', 3600);
        $client->pushTo('u', 'b', 3600);
        $client->setRateLimit('t', 5);
        self::assertSame(['scheduled', 'limited'], [$client->job('t', 'a')->state, $client->job('t', 'a')->flow]);
        self::assertSame('', $client->job('u', 'b')->flow, 'another topic runs');
        $client->pause('t');
        self::assertSame('paused', $client->job('t', 'a')->flow);
        $client->resume('t');
        $client->clearRateLimit('t');
        self::assertSame('', $client->job('t', 'a')->flow);
    }

    /**
     * A flow hash edited by hand: no readable limit, yet the topic is limited for the scripts (and held counts).
     *
     * @dataProvider layouts
     */
    public function testALimitThatDoesNotReadIsNoneButTheTopicStillCountsAsLimited(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pushTo('t', 'a', 0);
        $this->redis->hSet($this->key('flow'), 'per_second', 'fast');
        if ($layout === 'topic') {
            $this->redis->sAdd(self::P . 'topics', 't');
            usleep(20000);
        }
        self::assertNull($client->flow('t')->rateLimit);
        self::assertSame('limited', $client->job('t', 'a')->flow);
        $t = self::topic($client, 't');
        self::assertNull($t->rateLimit);
        self::assertSame($layout === 'topic' ? 1 : 0, $t->held, 'per topic the due job waits in the pool');
    }
}
