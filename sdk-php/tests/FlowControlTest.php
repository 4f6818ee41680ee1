<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\DelayerException;
use Delayer\Exception\RedisErrorException;
use Delayer\FlowState;

/**
 * pause(), resume(), isPaused() and flow() (flow.lua / flow_topic.lua, issue
 * 23, slice 3) in both layouts, on a real redis-server with no Delayer server:
 * what they answer, what they write (the protocol's names, written out here),
 * and that consumers obey them.
 */
final class FlowControlTest extends RedisTestCase
{
    use BlockedChild;

    private const P = 'fc:';

    private string $layout = 'classic';

    /** @return iterable<string, array{string}> */
    public static function layouts(): iterable
    {
        yield 'classic' => ['classic'];
        yield 'topic' => ['topic'];
    }

    private function key(string $kind, string $topic = 't'): string
    {
        if ($this->layout === 'topic') {
            return self::P . '{' . $topic . '}:' . $kind;
        }
        return self::P . [
            'ready' => "ready_queue:{$topic}", 'flow' => "flow:{$topic}", 'gate' => "flow_gate:{$topic}",
            'pool' => 'job_pool', 'reserved' => 'reserved',
        ][$kind];
    }

    private function flowClient(string $layout): Client
    {
        $this->layout = $layout;
        return $this->client(['layout' => $layout, 'prefix' => self::P]);
    }

    /** Jobs of topic $topic made ready by hand, as the server's move would. */
    private function ready(Client $client, string $topic, string ...$ids): void
    {
        foreach ($ids as $id) {
            $client->pushTo($topic, $id, 3600, "body {$id}");
            $this->redis->multi()->zRem($this->key('pool', $topic), $id)->lPush($this->key('ready', $topic), $id)->exec();
        }
    }

    /** @dataProvider layouts */
    public function testPauseAndResumeSayWhetherTheyChangedTheState(string $layout): void
    {
        $client = $this->flowClient($layout);
        self::assertFalse($client->isPaused('t'));
        $state = $client->flow('t');
        self::assertEquals(new FlowState(null, 0, false, $state->at), $state, 'a topic never paused runs');
        self::assertEqualsWithDelta($this->redisTime(), $state->at, 1.0, 'Redis\'s clock');

        $before = $this->redisTime();
        self::assertTrue($client->pause('t'));
        $since = $client->flow('t')->pausedSince;
        self::assertFalse($client->pause('t'), 'already paused');
        self::assertTrue($client->isPaused('t'));
        self::assertTrue($client->isPaused('t'), 'reading changes nothing');
        self::assertSame($since, $client->flow('t')->pausedSince, 'a second pause keeps the first time');
        self::assertEqualsWithDelta($before, $since, 1.0, 'Redis\'s clock');
        self::assertSame(sprintf('%.3f', $since), $this->redis->hGet($this->key('flow'), 'paused'));
        self::assertFalse($client->isPaused('u'), 'one topic only');

        $state = $client->flow('t');
        self::assertFalse($state->changed, 'get changes nothing');
        self::assertGreaterThanOrEqual($since, $state->at);

        self::assertTrue($client->resume('t'));
        self::assertFalse($client->resume('t'), 'already running');
        self::assertFalse($client->isPaused('t'));
        self::assertNull($client->flow('t')->pausedSince);
        self::assertSame(sprintf('%.3f', $since), $this->redis->hGet($this->key('flow'), 'last_paused'));
        self::assertFalse($client->resume('never-paused'), 'a resume of a running topic');
        self::assertTrue($client->pause('t'), 'paused again');
    }

    /** @dataProvider layouts */
    public function testAPausedTopicHandsOutNothingUntilResumed(string $layout): void
    {
        $client = $this->flowClient($layout);
        $this->ready($client, 't', 'a', 'b');
        $this->ready($client, 'u', 'x');
        self::assertTrue($client->pause('t'));

        self::assertFalse($client->pop('t'));
        self::assertFalse($client->reserve('t', 30));
        self::assertSame([[], []], $client->reserveMany('t', 30, 5));
        self::assertSame(['b', 'a'], $this->redis->lRange($this->key('ready'), 0, -1), 'the ready list untouched');
        self::assertSame('x', $client->pop('u')->id, 'another topic runs');

        self::assertTrue($client->resume('t'));
        self::assertSame('a', $client->pop('t')->id);
        self::assertSame('b', $client->reserve('t', 30)->id);
    }

    /** @dataProvider layouts */
    public function testABpopWaitingAcrossThePauseReturnsSoonAfterTheResume(string $layout): void
    {
        $client = $this->flowClient($layout);
        $this->ready($client, 't', 'a');
        self::assertTrue($client->pause('t'));
        // blocked on the gate: a second later the job is still ready, then another client's resume()
        $child = $this->whenBlocked(
            ['SLEEP', 1.0],
            ['EXPECT', ['a'], 'LRANGE', $this->key('ready'), '0', '-1'],
            ['CLIENT', true, ['layout' => $layout, 'prefix' => self::P], 'resume', 't'],
        );
        $start = microtime(true);
        $job = $client->bPop('t', 10);
        $end = microtime(true);
        [$code, $resumedAt] = $this->waitForChild($child);
        self::assertSame(0, $code, 'the helper saw it blocked, the job still ready, then resumed (true)');
        self::assertSame('a', $job->id);
        self::assertGreaterThan(1.0, $end - $start);
        self::assertLessThan(2.0, $end - $resumedAt, 'woken by the resume, not by the 5 s recheck');
    }

    public function testHeldCountsTheDueJobsOfThePausedTopicsPool(): void
    {
        $client = $this->flowClient('topic');
        $client->pushTo('t', 'due1', 0);
        $client->pushTo('t', 'due2', 0);
        $client->pushTo('t', 'later', 3600);
        $client->pushTo('u', 'other', 0);
        self::assertSame(0, $client->flow('t')->held, 'a running topic holds nothing');
        $client->pause('t');
        $deadline = microtime(true) + 5;
        while (($held = $client->flow('t')->held) !== 2 && microtime(true) < $deadline) {
            usleep(10000); // the pushes' due time is Redis's ms: due within a few ms
        }
        self::assertSame(2, $held, 'the due ones, not the later one nor another topic\'s');
        self::assertSame(3, $this->redis->zCard($this->key('pool')), 'nothing moved');
        $client->resume('t');
        self::assertSame(0, $client->flow('t')->held);
    }

    public function testHeldCountsTheClassicFlowPool(): void
    {
        $client = $this->flowClient('classic');
        // no server runs: its move's set-aside ids are written by hand
        $this->redis->zAdd(self::P . 'flow_pool:t', 1.0, 'a', 2.0, 'b', 3.0, 'c');
        self::assertSame(3, $client->flow('t')->held);
        self::assertTrue($client->pause('t'));
        self::assertSame(3, $client->flow('t')->held);
        self::assertSame(0, $client->flow('u')->held, 'another topic\'s pool');
    }

    /** @dataProvider layouts */
    public function testAFlowKeyOfTheWrongTypeIsARedisErrorNamingIt(string $layout): void
    {
        $client = $this->flowClient($layout);
        // The gate is only deleted and written: junk there is replaced (FlowControlTest's gate case).
        foreach (['flow' => fn () => $client->pause('t')] as $kind => $call) {
            $this->redis->flushAll();
            $this->redis->set($this->key($kind), 'x');
            foreach ([$call, fn () => $client->isPaused('t'), fn () => $client->flow('t')] as $each) {
                try {
                    $each();
                    self::fail('expected RedisErrorException');
                } catch (RedisErrorException $e) {
                    self::assertInstanceOf(DelayerException::class, $e);
                    self::assertStringContainsString('WRONGTYPE', $e->getMessage());
                    self::assertStringContainsString($this->key($kind), $e->getMessage());
                }
            }
            self::assertSame([$this->key($kind)], $this->redis->keys('*'), 'nothing written');
        }
    }

    public function testAClassicPauseListsTheTopicForTheServer(): void
    {
        $client = $this->flowClient('classic');
        $client->pause('t');
        $client->pause('t');
        self::assertSame(['t'], $this->redis->sMembers(self::P . 'flow_topics'));
        // the server takes it off once its flow pool is empty (move_flow.lua), not the resume
        $client->resume('t');
        self::assertSame(['t'], $this->redis->sMembers(self::P . 'flow_topics'));

        $perTopic = $this->flowClient('topic');
        $perTopic->pause('v');
        self::assertSame(['t'], $this->redis->sMembers(self::P . 'flow_topics'), 'the per-topic layout has no such list');
    }

    /** @dataProvider layouts */
    public function testAResumeAnnouncesTheTopicOnTheWakeChannel(string $layout): void
    {
        $client = $this->flowClient($layout);
        $client->pause('t');
        $wake = new WakeListener(RedisServer::shared()->port, self::P . 'wake');
        try {
            self::assertFalse($client->pause('t'));
            $before = $this->redisTime();
            self::assertTrue($client->resume('t'));
            self::assertFalse($client->resume('t'), 'announced once');
            $this->redis->publish(self::P . 'wake', 'marker');
            $message = $wake->next();
            self::assertMatchesRegularExpression('/^\d+\.\d{3} t$/', (string) $message);
            self::assertEqualsWithDelta($before, (float) $message, 1.0);
            self::assertSame('marker', $wake->next(), 'nothing from the pauses or the second resume');
        } finally {
            $wake->close();
        }
    }

    /** @dataProvider layouts */
    public function testABadTopicIsRefusedBeforeRedis(string $layout): void
    {
        $client = $this->flowClient($layout);
        foreach (['pause', 'resume', 'isPaused', 'flow'] as $method) {
            $this->assertRejectedBeforeRedis(fn (Client $c) => $c->{$method}(''), $client);
        }
        if ($layout === 'topic') {
            $this->assertRejectedBeforeRedis(fn (Client $c) => $c->pause('a{b}'), $client);
        }
    }
}
