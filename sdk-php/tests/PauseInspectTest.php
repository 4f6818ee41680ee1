<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ProtocolException;
use Delayer\RateLimit;
use Delayer\Replies;
use Delayer\TopicStats;

/**
 * What stats() and job() say of a paused topic (stats.lua / lookup.lua and
 * the per-topic layout's reads, issue 23, slice 3) in both layouts, on a real
 * redis-server with no Delayer server: the server's part (a classic move
 * setting a paused topic's due ids aside in its flow pool) is written by hand.
 */
final class PauseInspectTest extends RedisTestCase
{
    private const P = 'pi:';

    private string $layout = 'classic';

    /** @return iterable<string, array{string}> */
    public static function layouts(): iterable
    {
        yield 'classic' => ['classic'];
        yield 'topic' => ['topic'];
    }

    private function key(string $kind, string $topic): string
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

    /** Jobs due now in $topic: in the per-topic layout they wait in its pool (held while paused); a classic server sets them aside. */
    private function due(Client $client, string $topic, string ...$ids): void
    {
        foreach ($ids as $i => $id) {
            $client->pushTo($topic, $id, 0, "body {$id}");
            if ($this->layout === 'classic' && $client->isPaused($topic)) {
                $this->redis->multi()->zRem($this->key('pool', $topic), $id)->zAdd($this->key('flow_pool', $topic), $i + 1.0, $id)->exec();
            }
        }
        if ($this->layout === 'topic') {
            $this->redis->sAdd(self::P . 'topics', $topic); // as the server writes it from the announcements
            usleep(20000); // due by Redis's ms: by this client's clock too
        }
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

    /** @return array{0: bool, 1: float|null, 2: int} */
    private static function pause(Client $client, string $topic): array
    {
        $t = self::topic($client, $topic);
        return [$t->paused, $t->pausedSince, $t->held];
    }

    /** @dataProvider layouts */
    public function testStatsSayWhichTopicsArePausedSinceWhenAndWhatTheyHold(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pause('p');
        $since = $client->flow('p')->pausedSince;
        self::assertNotNull($since);
        $this->due($client, 'p', 'a', 'b');
        $client->pushTo('p', 'later', 3600);
        $this->due($client, 'r', 'x');

        $p = self::topic($client, 'p');
        self::assertSame([true, $since, 2], [$p->paused, $p->pausedSince, $p->held]);
        self::assertSame(3, $p->scheduled, 'held jobs are counted as scheduled too');
        self::assertSame([false, null, 0], self::pause($client, 'r'), 'a running topic, its due job not held');

        $client->resume('p');
        // the classic server puts the set-aside ids back (move_flow.lua): until then the flow pool holds them
        self::assertSame([false, null, $layout === 'classic' ? 2 : 0], self::pause($client, 'p'));
    }

    public function testAPausedTopicWithNoJobsIsListedInClassicStats(): void
    {
        $client = $this->layoutClient('classic');
        self::assertSame([], $client->stats()->topics);
        $client->pause('idle');
        $since = $client->flow('idle')->pausedSince;
        self::assertEquals([new TopicStats('idle', 0, 0, 0, 0, true, $since, 0)], $client->stats()->topics, 'listed from flow_topics');
    }

    /** @dataProvider layouts */
    public function testLookupSaysWhetherTheJobsTopicIsPaused(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pushTo('p', 'a', 3600);
        $client->pushTo('r', 'b', 3600);
        self::assertSame(['scheduled', ''], [$client->job('p', 'a')->state, $client->job('p', 'a')->flow]);
        $client->pause('p');
        self::assertSame(['scheduled', 'paused'], [$client->job('p', 'a')->state, $client->job('p', 'a')->flow]);
        self::assertSame('', $client->job('r', 'b')->flow, 'another topic runs');
        $client->resume('p');
        self::assertSame('', $client->job('p', 'a')->flow);
    }

    /** @dataProvider layouts */
    public function testAFlowHashOfTheWrongTypeOrWithoutATimeReadsAsPausedSinceUnknown(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $client->pushTo('p', 'a', 3600);
        $this->due($client, 'p', 'd');
        $this->due($client, 'r', 'x');
        $this->redis->set($this->key('flow', 'p'), 'x');
        self::assertSame([true, null, $layout === 'topic' ? 1 : 0], self::pause($client, 'p'), 'nothing of it is handed out');
        self::assertSame([false, null, 0], self::pause($client, 'r'), 'the other topics are still read');
        self::assertSame('paused', $client->job('p', 'a')->flow);

        $this->redis->del($this->key('flow', 'p'));
        $this->redis->hSet($this->key('flow', 'p'), 'paused', 'soon');
        self::assertSame([true, null, $layout === 'topic' ? 1 : 0], self::pause($client, 'p'));
        self::assertSame('paused', $client->job('p', 'a')->flow);
        // an empty `paused` is paused all the same for the scripts (they test the field): stats.lua's "?"
        $this->redis->hSet($this->key('flow', 'p'), 'paused', '');
        self::assertSame([true, null, $layout === 'topic' ? 1 : 0], self::pause($client, 'p'));
        self::assertSame('paused', $client->job('p', 'a')->flow);
    }

    public function testRepliesOfTheOldShapesAreProtocolErrors(): void
    {
        $entry = ['t', 1, 0, 0, 0, '', 0, '', ''];
        self::assertEquals([new TopicStats('t', 1, 0, 0, 0)], Replies::stats([1, 0, 1, $entry])->topics);
        self::assertEquals(
            [new TopicStats('t', 1, 0, null, 0, true, 1700000000.5, 3), new TopicStats('u', 0, 0, null, 0, true, null, 0, new RateLimit(2.5, 3))],
            Replies::stats([1, 0, 0, ['t', 1, 0, 0, 0, '1700000000.500', 3, '', ''], ['u', 0, 0, 0, 0, '?', 0, '2.5', '3']])->topics
        );
        $lookup = ['scheduled', 't', '1', '0', '', '1700000000.000', '', '', '', 'paused'];
        self::assertSame('paused', Replies::lookup($lookup, 'a')->flow);
        foreach ([
            static fn () => Replies::stats([1, 0, 1, \array_slice($entry, 0, 5)]),
            static fn () => Replies::stats([1, 0, 1, [...$entry, 0]]),
            static fn () => Replies::stats([1, 0, 1, \array_slice($entry, 0, 7)]), // before rate limits
            static fn () => Replies::stats([1, 0, 1, ['t', 1, 0, 0, 0, '', -1, '', '']]),
            static fn () => Replies::lookup(\array_slice($lookup, 0, 9), 'a'),
            static fn () => Replies::lookup([...$lookup, ''], 'a'),
        ] as $n => $bad) {
            try {
                $bad();
                self::fail("case {$n} was decoded");
            } catch (ProtocolException) {
                self::addToAssertionCount(1);
            }
        }
    }
}
