<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Exception\DelayerException;
use Delayer\Exception\ProtocolException;
use Delayer\Keys;
use Delayer\Message;
use Delayer\Ops;
use Delayer\Scripts;
use PHPUnit\Framework\TestCase;

/**
 * Ops reads replies without I/O, so a reply the protocol does not allow is
 * tried here directly: it is a ProtocolException (the malformed-reply kind of
 * docs/PROTOCOL.md, "Errors"), never taken for a job or for a lost connection.
 */
final class OpsTest extends TestCase
{
    /** @return iterable<string, array{\Closure(): mixed}> */
    public static function malformedReplies(): iterable
    {
        yield 'pop: two fields' => [static fn () => Ops::message(['id', 'topic'], Scripts::POP)];
        yield 'pop: a string' => [static fn () => Ops::message('id', Scripts::POP)];
        yield 'remove: 2' => [static fn () => Ops::flag(2, Scripts::REMOVE)];
        yield 'remove: "1"' => [static fn () => Ops::flag('1', Scripts::REMOVE)];
        yield 'reserve: attempts not an int' => [static fn () => Ops::reserved(['a', 't', 'b', '1', 25, '7', '1.000'])];
        yield 'touch: not a time' => [static fn () => Ops::timeOrFalse('soon', Scripts::TOUCH)];
        yield 'release: an int' => [static fn () => Ops::released(1)];
        yield 'dead list: an entry too short' => [static fn () => Ops::deadLetters([['a', 't']])];
        yield 'dead counts: one number' => [static fn () => Ops::deadCounts([1])];
        yield 'BRPOP: no id' => [static fn () => Ops::poppedId(['queue'])];
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
        self::assertFalse(Ops::message(false, Scripts::POP));
        self::assertEquals(Message::create('a', 't', 'b'), Ops::message(['a', 't', 'b', ''], Scripts::POP));
        self::assertTrue(Ops::flag(1, Scripts::REMOVE));
        self::assertFalse(Ops::flag(0, Scripts::REMOVE));
        self::assertSame(12.5, Ops::timeOrFalse('12.500', Scripts::TOUCH));
        self::assertSame([3, 1000], Ops::deadCounts([3, 1000]));
    }

    public function testCallsAreBuiltWithoutIo(): void
    {
        $keys = new Keys('p:');
        self::assertSame(
            [Scripts::REMOVE, ['p:job_pool', 'p:job_bucket:close order', 'p:scheduled_count'], ['close order']],
            Ops::remove($keys, 'close order')
        );
        [$script, $k, $argv] = Ops::push($keys, Ops::job($keys, Message::create('i', 't', 'b'), 1.5, 60), true);
        self::assertSame(Scripts::PUSH, $script);
        self::assertSame(['p:job_pool', 'p:job_bucket:i', 'p:scheduled_count'], $k);
        self::assertSame(['i', 't', 'b', '1500', '60000', '', '', '', '', Scripts::IF_ABSENT, 'p:wake', ''], $argv);
    }
}
