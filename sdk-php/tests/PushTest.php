<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;
use Delayer\Scripts;
use Delayer\ReservedMessage;
use Delayer\ScheduledMessage;

final class PushTest extends RedisTestCase
{
    public function testPushWritesTheProtocolLayout(): void
    {
        $client = $this->client();
        $before = $this->redisTime();
        self::assertTrue($client->schedule(new Message(['id' => 'order:1', 'topic' => 'order', 'body' => 'hello']), 30.5, 100));
        $after = $this->redisTime();

        self::assertSame(['topic' => 'order', 'body' => 'hello'], $this->redis->hGetAll('delayer:job_bucket:order:1'));
        self::assertSame('hash', self::typeName($this->redis->type('delayer:job_bucket:order:1')));
        $pttl = $this->redis->pTtl('delayer:job_bucket:order:1');
        self::assertGreaterThan((30.5 + 100) * 1000 - 2000, $pttl);
        self::assertLessThanOrEqual((30.5 + 100) * 1000, $pttl);

        self::assertSame(['order:1'], $this->redis->zRange('delayer:job_pool', 0, -1));
        $score = $this->redis->zScore('delayer:job_pool', 'order:1');
        self::assertGreaterThanOrEqual(floor(($before + 30.5) * 1000) / 1000, $score);
        self::assertLessThanOrEqual($after + 30.5 + 0.001, $score);
        // millisecond precision: the score is a whole number of milliseconds
        self::assertEqualsWithDelta(round($score * 1000), $score * 1000, 0.01);

        self::assertEqualsCanonicalizing(['delayer:job_bucket:order:1', 'delayer:job_pool', 'delayer:scheduled_count'], $this->redis->keys('*'), 'push writes the pool, the bucket and its topic\'s count, nothing else');
    }

    public function testAWholeFloatLifetimeIsAccepted(): void
    {
        self::assertTrue($this->client()->schedule(Message::create('f', 't'), 1, 60.0));
        self::assertEqualsWithDelta(61000, $this->redis->pTtl('delayer:job_bucket:f'), 2000);
    }

    public function testDefaultLifetimeIsSevenDays(): void
    {
        $this->client()->schedule(Message::create('a', 't', 'b'), 10);
        $ttl = $this->redis->ttl('delayer:job_bucket:a');
        self::assertGreaterThanOrEqual(604800 + 10 - 2, $ttl);
        self::assertLessThanOrEqual(604800 + 10, $ttl);
    }

    public function testShortFormPushesAnEmptyOrGivenBody(): void
    {
        $client = $this->client();
        self::assertTrue($client->pushTo('mail', 'mail:7', 0.25));
        self::assertTrue($client->pushTo('mail', 'mail:8', 1, 'with body'));
        self::assertSame(['topic' => 'mail', 'body' => ''], $this->redis->hGetAll('delayer:job_bucket:mail:7'));
        self::assertSame(['topic' => 'mail', 'body' => 'with body'], $this->redis->hGetAll('delayer:job_bucket:mail:8'));
        $pttl = $this->redis->pTtl('delayer:job_bucket:mail:7');
        self::assertGreaterThan(250 + 604800000 - 2000, $pttl);
        self::assertSame(2, $this->redis->zCard('delayer:job_pool'));
    }

    public function testRePushReplacesTheBucketAndDueTime(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('x', 'first', 'one'), 1000);
        $this->redis->hSet('delayer:job_bucket:x', 'stale', 'field');
        $client->schedule(Message::create('x', 'second', 'two'), 5);
        self::assertSame(['topic' => 'second', 'body' => 'two'], $this->redis->hGetAll('delayer:job_bucket:x'));
        self::assertLessThan($this->redisTime() + 10, $this->redis->zScore('delayer:job_pool', 'x'));
    }

    public function testDelayIsRoundedToTheNearestMillisecond(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('r', 't'), 100.0004); // 100000 ms
        $client->schedule(Message::create('s', 't'), 100.0006); // 100001 ms
        $r = $this->redis->zScore('delayer:job_pool', 'r');
        $s = $this->redis->zScore('delayer:job_pool', 's');
        self::assertEqualsWithDelta(round($r * 1000), $r * 1000, 0.01);
        self::assertEqualsWithDelta(round($s * 1000), $s * 1000, 0.01);
        // s was pushed after r with 1 ms more: its due time is at least 1 ms later
        self::assertGreaterThanOrEqual(0.0009, $s - $r);
        self::assertSame(100000, \Delayer\Validator::delayMs(100.0004));
        self::assertSame(100001, \Delayer\Validator::delayMs(100.0006));
        self::assertSame(1, \Delayer\Validator::delayMs(0.0005));
        self::assertSame(0, \Delayer\Validator::delayMs(0.0004));
        self::assertSame(315360000000, \Delayer\Validator::delayMs(315360000));
    }

    /** @return iterable<string, array{\Closure(Client): mixed}> */
    public static function invalidCalls(): iterable
    {
        $ok = static fn (string $id = 'ok', string $topic = 'ok') => Message::create($id, $topic, 'b');
        // Names: only an empty one is refused (docs/PROTOCOL.md, "Input rules");
        // testNamesDelayer1xCouldWriteWorkEverywhere covers the rest.
        yield 'empty id' => [static fn (Client $c) => $c->schedule($ok(''), 1)];
        yield 'empty topic' => [static fn (Client $c) => $c->schedule($ok('ok', ''), 1)];
        yield 'short form empty topic' => [static fn (Client $c) => $c->pushTo('', 'id', 1)];
        yield 'short form empty id' => [static fn (Client $c) => $c->pushTo('t', '', 1)];
        yield 'pop empty topic' => [static fn (Client $c) => $c->pop('')];
        yield 'bPop empty topic' => [static fn (Client $c) => $c->bPop('', 0.1)];
        yield 'remove empty id' => [static fn (Client $c) => $c->remove('')];
        yield 'pop topic not a string' => [static fn (Client $c) => $c->pop(['t'])];
        yield 'remove id not a string' => [static fn (Client $c) => $c->remove(1.5)];
        yield '1.x push: empty body' => [static fn (Client $c) => $c->push(Message::create('a', 't'), 1)];
        yield '1.x push: empty id' => [static fn (Client $c) => $c->push(new Message(['topic' => 't', 'body' => 'b']), 1)];
        yield '1.x push: non-numeric delay' => [static fn (Client $c) => $c->push($ok(), 'soon')];
        yield '1.x push: non-numeric lifetime' => [static fn (Client $c) => $c->push($ok(), 1, 'a week')];
        yield '1.x push: delay over 10 years' => [static fn (Client $c) => $c->push($ok(), '315360001')];
        yield '1.x bPop: non-numeric timeout' => [static fn (Client $c) => $c->bPop('t', 'long')];
        yield 'negative delay' => [static fn (Client $c) => $c->schedule($ok(), -1)];
        yield 'slightly negative delay' => [static fn (Client $c) => $c->schedule($ok(), -0.0001)];
        yield 'delay over 10 years' => [static fn (Client $c) => $c->schedule($ok(), 315360000.001)];
        yield 'NaN delay' => [static fn (Client $c) => $c->schedule($ok(), NAN)];
        yield 'infinite delay' => [static fn (Client $c) => $c->schedule($ok(), INF)];
        yield 'zero lifetime' => [static fn (Client $c) => $c->schedule($ok(), 1, 0)];
        yield 'negative lifetime' => [static fn (Client $c) => $c->schedule($ok(), 1, -5)];
        yield 'lifetime over 10 years' => [static fn (Client $c) => $c->schedule($ok(), 1, 315360001)];
        yield 'fractional lifetime' => [static fn (Client $c) => $c->schedule($ok(), 1, 1.5)];
        yield 'short form delay too big' => [static fn (Client $c) => $c->pushTo('topic', 'id', 315360001)];
        yield 'negative timeout' => [static fn (Client $c) => $c->bPop('t', -0.1)];
        yield 'NaN timeout' => [static fn (Client $c) => $c->bPop('t', NAN)];
        yield 'pushMany with one bad item' => [static fn (Client $c) => $c->pushMany([[$ok('a'), 1], [$ok(''), 1]])];
        yield 'pushMany with a bad shape' => [static fn (Client $c) => $c->pushMany([[$ok('a'), 1], ['a', 1]])];
        yield 'pushMany of 250 with the last one bad' => [static function (Client $c) use ($ok): void {
            $jobs = [];
            for ($i = 0; $i < 249; $i++) {
                $jobs[] = [$ok("ok:{$i}"), 1];
            }
            $jobs[] = [$ok('late'), 1, 0];
            $c->pushMany($jobs);
        }];
        yield 'pushMany of 250 with a bad one in the second call' => [static function (Client $c) use ($ok): void {
            $jobs = [];
            for ($i = 0; $i < 250; $i++) {
                $jobs[] = [$ok($i === 150 ? '' : "ok:{$i}"), 1];
            }
            $c->pushMany($jobs);
        }];
        yield 'pushMany with a bad delay' => [static fn (Client $c) => $c->pushMany([new ScheduledMessage($ok('a'), 1), new ScheduledMessage($ok('b'), -1)])];
    }

    /**
     * @dataProvider invalidCalls
     * @param \Closure(Client): mixed $call
     */
    public function testValidationErrorsTouchNothing(\Closure $call): void
    {
        $this->assertRejectedBeforeRedis($call);
        self::assertSame(1, $this->redis->dbSize());
    }

    public function testLongestAndUnicodeNamesAreAccepted(): void
    {
        $client = $this->client();
        $long = str_repeat('x', 200);
        $unicode = str_repeat('ü', 100); // 200 bytes
        self::assertTrue($client->schedule(Message::create($long, $unicode, 'b'), 0));
        self::assertTrue($client->schedule(Message::create('订单:42', 'キュー', 'b'), 0));
        self::assertEquals(['topic' => $unicode, 'body' => 'b'], $this->redis->hGetAll('delayer:job_bucket:' . $long));
        self::assertSame(['topic' => 'キュー', 'body' => 'b'], $this->redis->hGetAll('delayer:job_bucket:订单:42'));
    }

    public function testPushManyPipelinesEveryShape(): void
    {
        $client = $this->client();
        $generator = (static function () {
            yield [Message::create('m1', 'bulk', 'one'), 10];
            yield [Message::create('m2', 'bulk', 'two'), 20.5, 60.0]; // 60.0 is a whole number
            yield new ScheduledMessage(Message::create('m3', 'other', 'three'), 30, 120);
        })();
        self::assertSame(3, $client->pushMany($generator));
        self::assertSame(['topic' => 'bulk', 'body' => 'one'], $this->redis->hGetAll('delayer:job_bucket:m1'));
        self::assertSame(['topic' => 'bulk', 'body' => 'two'], $this->redis->hGetAll('delayer:job_bucket:m2'));
        self::assertSame(['topic' => 'other', 'body' => 'three'], $this->redis->hGetAll('delayer:job_bucket:m3'));
        self::assertSame(['m1', 'm2', 'm3'], $this->redis->zRange('delayer:job_pool', 0, -1));
        self::assertEqualsWithDelta((20.5 + 60) * 1000, $this->redis->pTtl('delayer:job_bucket:m2'), 2000);
        self::assertEqualsWithDelta((30 + 120) * 1000, $this->redis->pTtl('delayer:job_bucket:m3'), 2000);
        self::assertSame(0, $client->pushMany([]));
    }

    public function testPushManyLoadsTheScriptAfterScriptFlush(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('warm', 't'), 1); // loads push.lua
        $this->redis->script('flush');
        $jobs = [];
        for ($i = 0; $i < 1200; $i++) { // more than one pipeline chunk
            $jobs[] = [Message::create("bulk:{$i}", 't', (string) $i), 60];
        }
        self::assertSame(1200, $client->pushMany($jobs));
        self::assertSame(1201, $this->redis->zCard('delayer:job_pool'));
        self::assertSame('1199', $this->redis->hGet('delayer:job_bucket:bulk:1199', 'body'));
    }

    public function testPushManySends100JobsPerPushManyCall(): void
    {
        $client = $this->client();
        $topics = ['mail', 'sms', 'push'];
        $jobs = [];
        for ($i = 0; $i < 250; $i++) {
            $jobs[] = [Message::create("m:{$i}", $topics[$i % 3], "body-{$i}"), $i % 7, 60 + $i];
        }
        $this->redis->script('load', Scripts::source(Scripts::PUSH_MANY)); // known: no NOSCRIPT round
        $this->redis->rawCommand('CONFIG', 'RESETSTAT');
        $now = $this->redisTime();
        self::assertSame(250, $client->pushMany($jobs));
        $stats = $this->redis->info('commandstats');
        // 250 jobs: three push_many.lua calls (100, 100, 50) in one pipeline, and nothing else
        self::assertStringContainsString('calls=3,', (string) $stats['cmdstat_evalsha']);
        self::assertStringContainsString('failed_calls=0', (string) $stats['cmdstat_evalsha']);
        self::assertArrayNotHasKey('cmdstat_script|load', $stats);
        self::assertSame(250, $this->redis->zCard('delayer:job_pool'));
        foreach ($jobs as $i => [$message, $delay, $lifetime]) {
            self::assertSame(
                ['topic' => $topics[$i % 3], 'body' => "body-{$i}"],
                $this->redis->hGetAll("delayer:job_bucket:m:{$i}")
            );
            $score = $this->redis->zScore('delayer:job_pool', "m:{$i}");
            self::assertGreaterThan($now + $delay - 0.01, $score);
            self::assertLessThan($now + $delay + 2, $score);
            $pttl = $this->redis->pTtl("delayer:job_bucket:m:{$i}");
            self::assertGreaterThan(($delay + $lifetime) * 1000 - 2000, $pttl);
            self::assertLessThanOrEqual(($delay + $lifetime) * 1000, $pttl);
        }
        foreach ($topics as $topic) {
            self::assertSame(0, $this->redis->exists("delayer:ready_queue:{$topic}"));
        }
    }

    public function testPushManyKeepsTheOrderOfRepeatedIds(): void
    {
        $client = $this->client();
        $jobs = [];
        for ($i = 0; $i < 150; $i++) {
            $jobs[] = [Message::create("r:{$i}", 't', 'old'), 100];
        }
        $jobs[] = [Message::create('r:3', 't', 'new'), 5]; // in the second call: the later one wins
        self::assertSame(151, $client->pushMany($jobs));
        self::assertSame(150, $this->redis->zCard('delayer:job_pool'));
        self::assertSame('new', $this->redis->hGet('delayer:job_bucket:r:3', 'body'));
        self::assertLessThan($this->redisTime() + 10, $this->redis->zScore('delayer:job_pool', 'r:3'));
    }

    public function testPushManySurvivesScriptFlushBetweenBatches(): void
    {
        $client = $this->client();
        for ($round = 0; $round < 2; $round++) {
            $this->redis->script('flush');
            $jobs = [];
            for ($i = 0; $i < 1250; $i++) { // two pipelines: 10 calls, then 3
                $jobs[] = [Message::create("f{$round}:{$i}", 't' . ($i % 3), (string) $i), 60];
            }
            self::assertSame(1250, $client->pushMany($jobs));
        }
        self::assertSame(2500, $this->redis->zCard('delayer:job_pool'));
        self::assertSame(['topic' => 't1', 'body' => '1249'], $this->redis->hGetAll('delayer:job_bucket:f1:1249'));
    }

    public function testARedisErrorInPushAndPushManyRaisesRedisErrorException(): void
    {
        $client = $this->client();
        $this->redis->set('delayer:job_pool', 'not a zset');
        foreach ([
            static fn () => $client->schedule(Message::create('a', 't'), 1),
            static fn () => $client->push(Message::create('a', 't', 'b'), 1),
            static fn () => $client->pushMany([[Message::create('a', 't'), 1], [Message::create('b', 't'), 1]]),
        ] as $call) {
            try {
                $call();
                self::fail('expected RedisErrorException');
            } catch (\Delayer\Exception\RedisErrorException $e) {
                self::assertStringContainsString('WRONGTYPE', $e->getMessage());
            }
        }
    }

    public function testPushReloadsAfterScriptFlush(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('a', 't'), 1);
        $this->redis->script('flush');
        self::assertTrue($client->schedule(Message::create('b', 't'), 1));
        self::assertSame(2, $this->redis->zCard('delayer:job_pool'));
    }

    public function testCustomPrefixIsHonoured(): void
    {
        $client = $this->client(['prefix' => 'shop:delayer:']);
        $client->schedule(Message::create('p1', 'cart', 'x'), 0);
        self::assertSame(0, $this->redis->exists('delayer:job_pool'));
        self::assertSame(['p1'], $this->redis->zRange('shop:delayer:job_pool', 0, -1));
        self::assertSame(['topic' => 'cart', 'body' => 'x'], $this->redis->hGetAll('shop:delayer:job_bucket:p1'));
        self::assertSame(['cart' => 1], $this->moveDue(1, 'shop:delayer:'));
        self::assertSame(['p1'], $this->redis->lRange('shop:delayer:ready_queue:cart', 0, -1));
        self::assertFalse($this->client()->pop('cart'), 'the default prefix sees nothing');
        $message = $client->pop('cart');
        self::assertInstanceOf(Message::class, $message);
        self::assertSame('p1', $message->id);
        self::assertSame(['shop:delayer:topics'], $this->redis->keys('*'), 'only the topics move.lua recorded are left');
    }

    public function testMessageIsCompatibleWithTheOriginal(): void
    {
        $message = new Message(['id' => 42, 'topic' => 'order', 'body' => null]);
        self::assertSame('42', $message->id);
        self::assertSame('order', $message->getTopic());
        self::assertSame('', $message->getBody());
        self::assertFalse($message->validate(), '1.x: an empty body is not valid');
        self::assertTrue((new Message(['id' => 42, 'topic' => 'order', 'body' => 'b']))->validate());
        self::assertFalse((new Message(['topic' => 'x', 'body' => 'b']))->validate());
        $extra = new Message(['id' => 'a', 'topic' => 't', 'body' => 'b', 'priority' => 5]);
        self::assertSame(5, $extra->priority, '1.x kept extra keys as properties');
        self::assertTrue($extra->validate());
    }

    /**
     * Ids and topics Delayer 1.x could write (spaces, braces, control
     * characters, any length, any bytes, int ids) work in every call.
     */
    public function testNamesDelayer1xCouldWriteWorkEverywhere(): void
    {
        $client = $this->client();
        $names = [
            'space' => 'close order', 'braces' => '{a}b}', 'tab and newline' => "a\tb\nc", 'NUL' => "a\0b",
            'no-break space' => "a\u{00A0}b", '300 bytes' => str_repeat('x', 300), 'invalid UTF-8' => "a\xffb",
        ];
        foreach ($names as $what => $name) {
            self::assertTrue($client->push(new Message(['id' => $name, 'topic' => $name, 'body' => 'b']), 0), $what);
            $this->moveDue(1);
            $popped = $client->pop($name);
            self::assertInstanceOf(Message::class, $popped, $what);
            self::assertSame([$name, $name, 'b'], [$popped->id, $popped->topic, $popped->body], $what);

            self::assertTrue($client->pushTo($name, $name, 0, 'c'), $what);
            $this->moveDue(1);
            self::assertSame($name, $client->bPop($name, 5)->id, $what);

            $client->schedule(Message::create($name, $name, 'd'), 100);
            self::assertNotFalse($client->reschedule($name, 0), $what);
            $this->moveDue(1);
            $job = $client->reserve($name, 30);
            self::assertInstanceOf(ReservedMessage::class, $job, $what);
            self::assertTrue($client->bury($job), $what);
            self::assertSame([$name], array_map(static fn ($d) => $d->id, $client->deadLetters($name)), $what);
            self::assertSame(1, $client->requeueDead($name, [$name]), $what);
            $this->moveDue(1);
            $job = $client->bReserve($name, 30, 5);
            self::assertInstanceOf(ReservedMessage::class, $job, $what);
            self::assertTrue($client->release($name, 100, $job->receipt), $what);
            self::assertTrue($client->remove($name), $what);
            self::assertSame(0, $client->purgeDead($name, [$name]), $what);
            self::assertSame(0, $this->redis->zCard('delayer:job_pool'), $what);
            self::assertSame(0, $this->redis->exists('delayer:job_bucket:' . $name), $what);
        }
        // int ids, as 1.x took them
        self::assertTrue($client->push(new Message(['id' => 42, 'topic' => 't', 'body' => 'b']), 100));
        self::assertTrue($client->remove(42));
        self::assertFalse($client->remove(42));
    }

    /** mix/delayer-client 1.x's push took numeric strings and a negative delay (due now). */
    public function testThe1xPushTakesWhat1xTook(): void
    {
        $client = $this->client();
        $before = $this->redisTime();
        self::assertTrue($client->push(Message::create('s', 't', 'b'), '30', '100'));
        self::assertTrue($client->push(Message::create('n', 't', 'b'), -5));
        self::assertTrue($client->push(Message::create('f', 't', 'b'), '1.5'));
        $after = $this->redisTime();
        self::assertEqualsWithDelta(130000, $this->redis->pTtl('delayer:job_bucket:s'), 3000);
        $due = $this->redis->zScore('delayer:job_pool', 'n');
        self::assertGreaterThanOrEqual(floor($before * 1000) / 1000, $due, 'a negative delay is due now');
        self::assertLessThanOrEqual($after + 0.001, $due);
        self::assertGreaterThanOrEqual(floor(($before + 1.5) * 1000) / 1000, $this->redis->zScore('delayer:job_pool', 'f'));
        self::assertSame(['t' => 1], $this->moveDue(1));
        self::assertSame('n', $client->pop('t')->id);
        // named arguments with 1.x's parameter names
        self::assertTrue($client->push(message: Message::create('named', 'nt', 'b'), delayTime: 0, readyMaxLifetime: 60));
        self::assertEqualsWithDelta(60000, $this->redis->pTtl('delayer:job_bucket:named'), 3000);
        $this->moveDue(1);
        self::assertSame('named', $client->bPop(topic: 'nt', timeout: '5')->id);
        self::assertFalse($client->pop(topic: 'nt'));
        self::assertTrue($client->remove(id: 's'));
    }

    private static function typeName(mixed $type): string
    {
        return match ($type) {
            \Redis::REDIS_HASH => 'hash',
            \Redis::REDIS_ZSET => 'zset',
            \Redis::REDIS_LIST => 'list',
            \Redis::REDIS_STRING => 'string',
            default => 'other',
        };
    }
}
