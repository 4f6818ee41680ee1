<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;
use Delayer\Traceparent;

/**
 * Trace context across the delay (issue 22): a traceparent given at push
 * reaches pop, bPop, reserve, reserveMany and job(); a malformed one is
 * refused at push (nothing written); one found malformed in Redis is handed
 * out as null, never an error. The Worker's Job: {@see TraceWorkerTest}.
 */
final class TraceTest extends RedisTestCase
{
    private const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

    public function testEveryConsumerGetsTheTraceparentPushed(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('a', 't', 'x')->withTraceparent(self::TP), 0);
        $client->pushMany([
            [new Message(['id' => 'b', 'topic' => 't', 'traceparent' => self::TP]), 0],
            [Message::create('c', 't'), 0],
        ]);
        self::assertSame(self::TP, $this->redis->hGet('delayer:job_bucket:a', 'traceparent'));
        self::assertSame(self::TP, $this->redis->hGet('delayer:job_bucket:b', 'traceparent'));
        self::assertFalse($this->redis->hExists('delayer:job_bucket:c', 'traceparent'), 'absent: no field');
        self::assertSame(self::TP, $client->job('t', 'a')->traceparent);
        $this->moveDue(3);
        $first = $client->pop('t');
        $second = $client->bPop('t', 1);
        $third = $client->reserve('t', 30);
        self::assertSame(['a', self::TP, self::TP], [$first->id, $first->traceparent, $first->getTraceparent()]);
        self::assertSame(['b', self::TP], [$second->id, $second->traceparent]);
        self::assertSame(['c', null], [$third->id, $third->getTraceparent()]);

        $client->pushMany([[Message::create('d', 'u')->withTraceparent(self::TP), 0]]);
        $this->moveDue(1);
        [, $jobs] = $client->reserveMany('u', 30, 10);
        self::assertSame([self::TP], array_map(static fn ($j) => $j->traceparent, $jobs));
    }

    /** @return iterable<string, array{string}> */
    public static function malformed(): iterable
    {
        yield 'upper case' => [strtoupper(self::TP)];
        yield 'version 01' => ['01' . substr(self::TP, 2)];
        yield 'zero trace id' => ['00-' . str_repeat('0', 32) . '-00f067aa0ba902b7-01'];
        yield 'zero span id' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-' . str_repeat('0', 16) . '-01'];
        yield 'trailing' => [self::TP . "\n"];
        yield 'not one' => ['not one'];
    }

    /** @dataProvider malformed */
    public function testAMalformedTraceparentIsRefusedAndNothingIsWritten(string $bad): void
    {
        $client = $this->client();
        try {
            $client->schedule(Message::create('x', 't')->withTraceparent($bad), 0);
            self::fail('withTraceparent took ' . $bad);
        } catch (InvalidArgumentException $e) {
            self::assertStringContainsString('traceparent', $e->getMessage());
        }
        $message = Message::create('y', 't');
        $message->traceparent = $bad; // set by hand: checked again at push
        $this->expectException(InvalidArgumentException::class);
        try {
            $client->pushMany([[Message::create('z', 't'), 0], [$message, 0]]);
        } finally {
            self::assertSame(0, $this->redis->exists('delayer:job_bucket:x', 'delayer:job_bucket:y', 'delayer:job_bucket:z'));
        }
    }

    public function testAMalformedTraceparentInRedisIsHandedOutAsNull(): void
    {
        $client = $this->client();
        $hostile = ["\xff\xfe garbage", str_repeat('0', 100000), strtoupper(self::TP)];
        foreach ($hostile as $i => $value) {
            $client->schedule(Message::create("h{$i}", 't'), 0);
            $this->redis->hSet("delayer:job_bucket:h{$i}", 'traceparent', $value);
        }
        $this->moveDue(3);
        $log = ini_set('error_log', '/dev/null');
        try {
            self::assertNull($client->job('t', 'h0')->traceparent);
            $got = [$client->pop('t'), $client->reserve('t', 30), $client->pop('t')];
        } finally {
            ini_set('error_log', (string) $log);
        }
        self::assertSame([['h0', null], ['h1', null], ['h2', null]], array_map(static fn ($m) => [$m->id, $m->traceparent], $got));
        self::assertNull(Traceparent::fromRedis('x', ''));
    }
}
