<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;
use Delayer\Exception\DelayerException;
use Delayer\Message;

final class PopTest extends RedisTestCase
{
    public function testPopOnAnEmptyQueueReturnsFalse(): void
    {
        self::assertFalse($this->client()->pop('nothing'));
    }

    public function testJobIsNotReadyBeforeItsDueTime(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('later', 't', 'b'), 60);
        $source = file_get_contents(self::repoLuaDir() . '/move.lua');
        $result = $this->redis->eval($source, [
            'delayer:job_pool', 'delayer:malformed', 'delayer:scheduled_count', 'delayer:topics', 'delayer:reserved',
            'delayer:job_bucket:', 'delayer:ready_queue:', '1000',
        ], 5);
        self::assertSame(0, $result[0]);
        self::assertFalse($client->pop('t'));
    }

    public function testPopIsFirstDueFirstOut(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('third', 'fifo', '3'), 0.3);
        $client->schedule(Message::create('first', 'fifo', '1'), 0.1);
        $client->schedule(Message::create('second', 'fifo', '2'), 0.2);
        $client->schedule(Message::create('elsewhere', 'other', 'x'), 0);
        self::assertSame(['fifo' => 3, 'other' => 1], $this->moveDue(4));

        foreach (['first' => '1', 'second' => '2', 'third' => '3'] as $id => $body) {
            $message = $client->pop('fifo');
            self::assertInstanceOf(Message::class, $message);
            self::assertSame([$id, 'fifo', $body], [$message->id, $message->topic, $message->body]);
            self::assertSame(0, $this->redis->exists("delayer:job_bucket:{$id}"), 'the bucket is deleted on pop');
        }
        self::assertFalse($client->pop('fifo'));
        self::assertSame('elsewhere', $client->pop('other')->getId());
        self::assertSame(['delayer:topics'], $this->redis->keys('*'), 'only the topics move.lua recorded are left');
    }

    public function testPopSkipsIdsWhoseBucketIsGone(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('expired', 'skip', 'x'), 0);
        $client->schedule(Message::create('alive', 'skip', 'y'), 0.05);
        $this->moveDue(2);
        $this->redis->del('delayer:job_bucket:expired'); // as if its TTL ran out
        $message = $client->pop('skip');
        self::assertInstanceOf(Message::class, $message);
        self::assertSame('alive', $message->id);
        self::assertFalse($client->pop('skip'));
        self::assertSame(0, $this->redis->lLen('delayer:ready_queue:skip'));
    }

    public function testBPopReturnsAJobAlreadyReady(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('ready', 'bq', 'now'), 0);
        $this->moveDue(1);
        $start = microtime(true);
        $message = $client->bPop('bq', 5);
        self::assertLessThan(1.0, microtime(true) - $start);
        self::assertInstanceOf(Message::class, $message);
        self::assertSame(['ready', 'bq', 'now'], [$message->id, $message->topic, $message->body]);
        self::assertSame(['delayer:topics'], $this->redis->keys('*'), 'only the topics move.lua recorded are left');
    }

    public function testBPopWithTimeoutZeroWaitsForeverButReturnsAReadyJob(): void
    {
        $client = $this->client(['timeout' => 0.5]);
        $client->schedule(Message::create('forever', 'bq', 'f'), 0);
        $this->moveDue(1);
        self::assertSame('forever', $client->bPop('bq', 0)->id);
        self::assertFalse($client->pop('bq'), 'the read timeout is restored and the connection usable');
    }

    public function testBPopSkipsIdsWhoseBucketIsGone(): void
    {
        $client = $this->client();
        $this->redis->lPush('delayer:ready_queue:bq', 'ghost-1', 'ghost-2');
        $client->schedule(Message::create('real', 'bq', 'r'), 0);
        $this->moveDue(1);
        $message = $client->bPop('bq', 2);
        self::assertInstanceOf(Message::class, $message);
        self::assertSame('real', $message->id);
        self::assertSame(['delayer:topics'], $this->redis->keys('*'), 'only the topics move.lua recorded are left');
    }

    public function testBPopTimesOutWithFalse(): void
    {
        $client = $this->client();
        $this->redis->lPush('delayer:ready_queue:bq', 'ghost'); // skipped, then waits again
        $start = microtime(true);
        self::assertFalse($client->bPop('bq', 0.2));
        $elapsed = microtime(true) - $start;
        self::assertGreaterThanOrEqual(0.2, $elapsed);
        self::assertLessThan(1.5, $elapsed);
        // the connection is still healthy after the blocking call
        self::assertFalse($client->pop('bq'));
    }

    public function testBPopWaitsLongerThanTheReadTimeout(): void
    {
        $client = $this->client(['timeout' => 0.2]);
        $start = microtime(true);
        self::assertFalse($client->bPop('bq', 0.5));
        self::assertGreaterThanOrEqual(0.5, microtime(true) - $start);
        self::assertFalse($client->pop('bq'));
    }

    public function testRemoveBeforeDuePreventsDelivery(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('cancel-me', 'rm', 'x'), 0);
        $client->schedule(Message::create('keep-me', 'rm', 'y'), 0);
        self::assertTrue($client->remove('cancel-me'));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:cancel-me'));
        self::assertSame(['rm' => 1], $this->moveDue(1));
        self::assertSame('keep-me', $client->pop('rm')->id);
        self::assertFalse($client->pop('rm'));
        self::assertFalse($client->remove('cancel-me'), 'nothing left to cancel');
    }

    public function testRemoveAfterTheMoveMakesPopSkipIt(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('moved', 'rm', 'x'), 0);
        $this->moveDue(1);
        self::assertTrue($client->remove('moved'));
        self::assertFalse($client->pop('rm'));
    }

    public function testRemoveOfAnUnknownIdReturnsFalse(): void
    {
        self::assertFalse($this->client()->remove('never-pushed'));
    }

    public function testBinaryAndLargeBodiesRoundTrip(): void
    {
        $client = $this->client();
        $allBytes = '';
        for ($i = 0; $i < 256; $i++) {
            $allBytes .= \chr($i);
        }
        $large = random_bytes(1 << 20);
        $client->schedule(Message::create('bin', 'bin', $allBytes), 0);
        $client->pushTo('bin', 'large', 0.001, $large);
        $client->schedule(Message::create('empty', 'bin', ''), 0.002);
        $this->moveDue(3);

        $bin = $client->pop('bin');
        self::assertSame($allBytes, $bin->body);
        $big = $client->bPop('bin', 1);
        self::assertSame('large', $big->id);
        self::assertSame(1 << 20, \strlen($big->body));
        self::assertTrue($big->body === $large);
        self::assertSame('', $client->pop('bin')->body);
    }

    public function testPopsAJobWrittenByTheOriginalClient(): void
    {
        // exactly what mix/delayer-client's push() sent (integer seconds, client clock)
        $now = (int) $this->redis->time()[0];
        $this->redis->multi();
        $this->redis->hMSet('delayer:job_bucket:legacy:1', ['topic' => 'legacy', 'body' => '{"old":true}']);
        $this->redis->expire('delayer:job_bucket:legacy:1', 0 + 604800);
        $this->redis->zAdd('delayer:job_pool', $now + 0, 'legacy:1');
        $this->redis->exec();

        self::assertSame(['legacy' => 1], $this->moveDue(1));
        $message = $this->client()->pop('legacy');
        self::assertInstanceOf(Message::class, $message);
        self::assertSame(['legacy:1', 'legacy', '{"old":true}'], [$message->id, $message->topic, $message->body]);
    }

    public function testAJobWePushIsReadableTheOriginalWay(): void
    {
        $this->client()->schedule(Message::create('ours', 'compat', "raw\0body"), 0);
        $this->moveDue(1);
        // mix/delayer-client's pop(): RPOP; HGETALL; DEL
        $id = $this->redis->rPop('delayer:ready_queue:compat');
        self::assertSame('ours', $id);
        self::assertSame(['topic' => 'compat', 'body' => "raw\0body"], $this->redis->hGetAll('delayer:job_bucket:' . $id));
        self::assertSame(1, $this->redis->del('delayer:job_bucket:' . $id));
    }

    public function testPopReloadsItsScriptAfterScriptFlush(): void
    {
        $client = $this->client();
        self::assertFalse($client->pop('t')); // loads pop.lua
        $client->schedule(Message::create('a', 't'), 0);
        $this->moveDue(1);
        $this->redis->script('flush');
        self::assertSame('a', $client->pop('t')->id);
    }

    /**
     * A command Redis refuses is RedisErrorException, not ConnectionException
     * (a worker retrying on connection errors would retry it forever), and
     * the connection stays up.
     */
    public function testARedisErrorRaisesRedisErrorException(): void
    {
        $client = $this->client();
        $this->redis->set('delayer:ready_queue:wrongtype', 'not a list');
        foreach ([
            'pop' => static fn () => $client->pop('wrongtype'),
            'bPop' => static fn () => $client->bPop('wrongtype', 1),
        ] as $name => $call) {
            try {
                $call();
                self::fail("{$name}: expected RedisErrorException");
            } catch (RedisErrorException $e) {
                self::assertInstanceOf(DelayerException::class, $e);
                self::assertNotInstanceOf(ConnectionException::class, $e, $name);
                self::assertNotInstanceOf(\RedisException::class, $e, $name);
                self::assertStringContainsString('WRONGTYPE', $e->getMessage(), $name);
            }
        }
        $clients = $this->redis->client('list');
        self::assertFalse($client->pop('t'), 'the same connection goes on');
        self::assertSame(\count($clients), \count($this->redis->client('list')), 'no new connection');
    }

    public function testAMalformedBucketIsParkedNotLost(): void
    {
        $client = $this->client();
        $this->redis->lPush('delayer:ready_queue:t', 'bad');
        $this->redis->set('delayer:job_bucket:bad', 'a string, not a hash');
        self::assertFalse($client->pop('t'));
        self::assertSame(['bad'], $this->redis->lRange('delayer:malformed', 0, -1));
        self::assertSame('a string, not a hash', $this->redis->get('delayer:job_bucket:bad'), 'bucket kept');

        // a hash without a topic, met by pop and by bPop
        $this->redis->hSet('delayer:job_bucket:notopic', 'body', 'b');
        $this->redis->lPush('delayer:ready_queue:t', 'notopic');
        self::assertFalse($client->pop('t'));
        $this->redis->lPush('delayer:ready_queue:t', 'notopic');
        self::assertFalse($client->bPop('t', 0.05));
        self::assertSame(['notopic', 'notopic', 'bad'], $this->redis->lRange('delayer:malformed', 0, -1));
        self::assertSame(['body' => 'b'], $this->redis->hGetAll('delayer:job_bucket:notopic'), 'bucket kept');
    }
}
