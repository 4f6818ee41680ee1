<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Exception\DelayerException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\FlowState;
use Delayer\Exception\ProtocolException;
use Delayer\Keys;
use Delayer\Message;
use Delayer\RateLimit;
use Delayer\Calls;
use Delayer\Replies;
use Delayer\Scripts;
use PHPUnit\Framework\TestCase;

/**
 * Replies reads replies without I/O, so a reply the protocol does not allow is
 * tried here directly: it is a ProtocolException (the malformed-reply kind of
 * docs/PROTOCOL.md, "Errors"), never taken for a job or for a lost connection.
 */
final class CallsTest extends TestCase
{
    /** @return iterable<string, array{\Closure(): mixed}> */
    public static function malformedReplies(): iterable
    {
        yield 'pop: two fields' => [static fn () => Replies::pop(['id', 'topic'])];
        yield 'pop: a string' => [static fn () => Replies::pop('id')];
        yield 'remove: 2' => [static fn () => Replies::remove(2)];
        yield 'remove: "1"' => [static fn () => Replies::remove('1')];
        yield 'reserve: attempts not an int' => [static fn () => Replies::reserve(['a', 't', 'b', '1', 25, '7', '1.000'])];
        yield 'touch: not a time' => [static fn () => Replies::touch('soon')];
        yield 'release: an int' => [static fn () => Replies::release(1)];
        yield 'dead list: an entry too short' => [static fn () => Replies::deadList([['a', 't']])];
        yield 'dead counts: one number' => [static fn () => Replies::deadAction([1])];
        yield 'BRPOP: no id' => [static fn () => Replies::brpop(['queue'])];
        yield 'wait: no gate' => [static fn () => Replies::wait(['paused', 5000, ''])];
        yield 'wait: the time a string' => [static fn () => Replies::pop(['paused', '5000', 'g'])];
        yield 'batch: jobs beside a wait' => [static fn () => Replies::reserveBatch([[], [['a', 't', 'b', 1, 25, '7', '1.000', '']], ['paused', 5000, 'g']], 0, 5)];
        yield 'batch: a third element not a wait' => [static fn () => Replies::reserveBatch([[], [], ['x']], 0, 5)];
        yield 'flow: three fields' => [static fn () => Replies::flow(['', 0, '1.000'])];
        yield 'flow: the four fields before rate limits' => [static fn () => Replies::flow(['', 0, '1.000', 0])];
        yield 'flow: seven fields' => [static fn () => Replies::flow(['', 0, '1.000', 0, '', '', ''])];
        yield 'flow: paused since not a time' => [static fn () => Replies::flow(['soon', 0, '1.000', 0, '', ''])];
        yield 'flow: changed 2' => [static fn () => Replies::flow(['', 2, '1.000', 0, '', ''])];
        yield 'flow: now not a time' => [static fn () => Replies::flow(['', 0, '', 0, '', ''])];
        yield 'flow: held a string' => [static fn () => Replies::flow(['', 0, '1.000', '3', '', ''])];
        yield 'flow: held negative' => [static fn () => Replies::flow(['', 0, '1.000', -1, '', ''])];
        yield 'flow: nil' => [static fn () => Replies::flow(null)];
    }

    /**
     * @dataProvider malformedReplies
     * @param \Closure(): mixed $read
     */
    public function testAMalformedReplyIsAProtocolException(\Closure $read): void
    {
        try {
            $read();
            self::fail('expected ProtocolException');
        } catch (ProtocolException $e) {
            self::assertInstanceOf(DelayerException::class, $e);
            self::assertStringContainsString('unexpected', $e->getMessage());
        }
    }

    public function testWellFormedRepliesRead(): void
    {
        self::assertFalse(Replies::pop(false));
        self::assertEquals(Message::create('a', 't', 'b'), Replies::pop(['a', 't', 'b', '']));
        self::assertTrue(Replies::remove(1));
        self::assertFalse(Replies::remove(0));
        self::assertSame(12.5, Replies::touch('12.500'));
        self::assertSame([3, 1000], Replies::deadAction([3, 1000]));
        // a paused topic's claim: nothing for the non-blocking calls, where to wait for BlockingWait
        $wait = ['paused', 5000, 'p:flow_gate:t'];
        self::assertSame(['p:flow_gate:t', 5.0], Replies::wait($wait));
        self::assertNull(Replies::wait(['a', 't', 'b', '']));
        self::assertFalse(Replies::pop($wait));
        self::assertFalse(Replies::reserve($wait));
        self::assertSame([[true], []], Replies::reserveBatch([[1], [], $wait], 1, 5));
        self::assertEquals(new FlowState(12.5, 3, true, 12.5), Replies::flow(['12.500', 1, '12.500', 3, '', '']));
        self::assertEquals(new FlowState(null, 0, false, 13.25), Replies::flow(['', 0, '13.250', 0, '', '']));
        self::assertEquals(new FlowState(null, 2, true, 13.25, new RateLimit(0.5, 1)), Replies::flow(['', 1, '13.250', 2, '0.5', '1']));
    }

    /** A limit Redis holds that does not read as one is no limit, never an error: the hash may be edited by hand. */
    public function testARateLimitReadsOnlyWhenBothFieldsDo(): void
    {
        self::assertEquals(new RateLimit(100.0, 20), Replies::rateLimit('100', '20'));
        self::assertEquals(new RateLimit(1e-5, 1), Replies::rateLimit('1.0E-5', 1));
        self::assertEquals(new RateLimit(50.0, 7), Replies::rateLimit(50, '7'));
        foreach ([['', ''], [false, false], [null, null], ['', '5'], ['5', ''], ['fast', '5'], ['5', 'many'], ['0', '5'], ['-1', '5'],
            ['NAN', '5'], ['INF', '5'], ['1e999', '5'], ['5', '0'], ['5', '1.5'], ['5', '-1'], ['5', '99999999999999999999'], [[], '5']] as [$rate, $burst]) {
            self::assertNull(Replies::rateLimit($rate, $burst), var_export([$rate, $burst], true));
        }
    }

    /** A rate goes as the shortest decimal that reads back as the same double, whatever php.ini's precision says. */
    public function testARateGoesAsTheShortestDecimalThatReadsBack(): void
    {
        $argv = static fn (int|float $rate, ?int $burst = null): array => \array_slice(Calls::flow(new Keys('p:'), 't', 'limit', $rate, $burst)[2], 3);
        self::assertSame(['100', ''], $argv(100));
        self::assertSame(['100', '20'], $argv(100.0, 20));
        self::assertSame(['0.5', '0'], $argv(0.5, 0), 'the script refuses a burst of 0, not the SDK');
        self::assertSame(['0.1', ''], $argv(0.1));
        self::assertSame(['0.3333333333333333', ''], $argv(1 / 3), '(string) would keep 14 digits: another rate');
        self::assertSame(['0.000011574074074074073', ''], $argv(1 / 86400));
        self::assertSame(['0.00001', ''], $argv(1.0E-5));
        self::assertSame(['1000000', ''], $argv(1e6));
        self::assertSame(['-1', ''], $argv(-1));
        self::assertSame(['NAN', ''], $argv(NAN), 'refused by the script, by name');
        self::assertSame(['INF', ''], $argv(INF));
        foreach ([1e-300, 1e300, 5e-324, 0.1 + 0.2, 123456.789, 2e6] as $rate) {
            self::assertSame($rate, (float) $argv($rate)[0]);
        }
        $precision = ini_get('precision');
        ini_set('precision', '5');
        ini_set('serialize_precision', '17');
        try {
            self::assertSame(['0.3333333333333333', ''], $argv(1 / 3));
            self::assertSame(['0.1', ''], $argv(0.1));
        } finally {
            ini_set('precision', (string) $precision);
            ini_set('serialize_precision', '-1');
        }
    }

    public function testFlowCallsNameTheLayoutsKeys(): void
    {
        self::assertSame(
            ['flow', ['p:flow:t', 'p:flow_gate:t', 'p:flow_topics', 'p:flow_pool:t'], ['t', 'pause', 'p:wake', '', '']],
            Calls::flow(new Keys('p:'), 't', 'pause'),
        );
        self::assertSame(
            ['flow_topic', ['p:{t}:flow', 'p:{t}:gate', 'p:{t}:pool'], ['t', 'get', 'p:wake', '', '']],
            Calls::flow(new Keys('p:', Keys::TOPIC), 't', 'get'),
        );
        self::assertSame(['t', 'limit', 'p:wake', '0.5', '3'], Calls::flow(new Keys('p:', Keys::TOPIC), 't', 'limit', 0.5, 3)[2]);
        self::assertSame(['t', 'unlimit', 'p:wake', '', ''], Calls::flow(new Keys('p:'), 't', 'unlimit')[2]);
        foreach ([[new Keys('p:'), ''], [new Keys('p:', Keys::TOPIC), 'a{b}'], [new Keys('p:'), 'x']] as $i => [$keys, $topic]) {
            try {
                Calls::flow($keys, $topic, $i === 2 ? 'stop' : 'get');
                self::fail("expected InvalidArgumentException for case {$i}");
            } catch (InvalidArgumentException $e) {
                self::assertInstanceOf(DelayerException::class, $e);
            }
        }
    }

    public function testCallsAreBuiltWithoutIo(): void
    {
        $keys = new Keys('p:');
        self::assertSame(
            [Scripts::REMOVE, ['p:job_pool', 'p:job_bucket:close order', 'p:scheduled_count'], ['close order', 'p:flow_pool:']],
            Calls::remove($keys, 'close order')
        );
        // The flow-pool prefix (a paused topic's held jobs, classic layout only): "" per topic.
        self::assertSame('p:flow_pool:t', $keys->flowPool('t'));
        self::assertSame('p:flow_topics', $keys->flowTopics());
        self::assertSame(['i', '5', 'p:wake', 'p:flow_pool:'], Calls::reschedule($keys, 'i', 5)[2]);
        self::assertSame(['i', 't', 'p:flow_pool:'], Calls::lookup($keys, 't', 'i')[2]);
        $perTopic = new Keys('p:', Keys::TOPIC);
        self::assertSame(['i'], Calls::remove($perTopic, 'i', 't')[2]);
        self::assertSame(['i', '5', 'p:wake', ''], Calls::reschedule($perTopic, 'i', 5, 't')[2]);
        self::assertSame(['i', 't', ''], Calls::lookup($perTopic, 't', 'i')[2]);
        // lookup.lua's KEYS[4]: the topic's flow hash (its "paused": the job's flow)
        self::assertSame(['p:job_bucket:i', 'p:job_pool', 'p:reserved', 'p:flow:t'], Calls::lookup($keys, 't', 'i')[1]);
        self::assertSame(['p:{t}:job:i', 'p:{t}:pool', 'p:{t}:reserved', 'p:{t}:flow'], Calls::lookup($perTopic, 't', 'i')[1]);
        self::assertSame(
            [Scripts::STATS, ['p:topics', 'p:scheduled_count', 'p:job_pool', 'p:reserved', 'p:flow_topics'],
                ['p:ready_queue:', 'p:dead:', 'p:job_bucket:', '1000', 'p:flow:', 'p:flow_pool:']],
            Calls::stats($keys)
        );
        [$script, $k, $argv] = Calls::push($keys, Calls::job($keys, Message::create('i', 't', 'b'), 1.5, 60), true);
        self::assertSame(Scripts::PUSH, $script);
        self::assertSame(['p:job_pool', 'p:job_bucket:i', 'p:scheduled_count'], $k);
        self::assertSame(['i', 't', 'b', '1500', '60000', '', '', '', '', Scripts::IF_ABSENT, 'p:wake', ''], $argv);
    }
}
