<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\DeadLetter;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;
use Delayer\ReservedMessage;

/**
 * The worker's client operations (issue 14): reserveMany (reserve.lua's
 * batch mode: ack some, reserve up to n, one call) and the error text that
 * release and bury keep on the job (release.lua's ARGV[8], last_error).
 */
final class ReserveManyTest extends RedisTestCase
{
    private function ready(Client $client, string $topic, int $n, string $prefix = 'j'): void
    {
        $jobs = [];
        for ($i = 0; $i < $n; $i++) {
            $jobs[] = [Message::create("{$prefix}{$i}", $topic, "body{$i}"), 0];
        }
        $client->pushMany($jobs);
        $this->moveDue($n);
    }

    public function testReservesUpToNInReadyOrder(): void
    {
        $client = $this->client();
        $this->ready($client, 'mail', 5);

        [$acked, $jobs] = $client->reserveMany('mail', 30, 3);
        self::assertSame([], $acked);
        self::assertSame(['j0', 'j1', 'j2'], array_map(static fn (ReservedMessage $j): string => $j->id, $jobs));
        foreach ($jobs as $i => $job) {
            self::assertSame(['mail', "body{$i}", 1, 25], [$job->topic, $job->body, $job->attempts, $job->maxAttempts]);
            self::assertEqualsWithDelta($this->redisTime() + 30, $job->deadline, 2.0);
            self::assertSame($job->receipt, $this->redis->hGet("delayer:job_bucket:{$job->id}", 'receipt'));
        }
        self::assertSame(3, $this->redis->zCard('delayer:reserved'));

        // fewer ready than asked: what there is
        [, $rest] = $client->reserveMany('mail', 30, 10);
        self::assertSame(['j3', 'j4'], array_map(static fn (ReservedMessage $j): string => $j->id, $rest));
        [, $none] = $client->reserveMany('mail', 30, 10);
        self::assertSame([], $none);
    }

    public function testAcksFirstThenReservesInOneCall(): void
    {
        $client = $this->client();
        $this->ready($client, 'mail', 3);
        [, [$first]] = $client->reserveMany('mail', 30, 1);
        [, [$second]] = $client->reserveMany('mail', 30, 1);

        $before = $this->evalshaCalls();
        [$acked, $jobs] = $client->reserveMany('mail', 30, 1, [$first, $second->id]);
        self::assertSame(1, $this->evalshaCalls() - $before, 'one call acks and reserves');
        self::assertSame([true, true], $acked);
        self::assertSame(['j2'], array_map(static fn (ReservedMessage $j): string => $j->id, $jobs));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:j0', 'delayer:job_bucket:j1'));
        self::assertSame(['j2'], $this->redis->zRange('delayer:reserved', 0, -1));

        // the same acks again: no longer held; n = 0 only acks
        self::assertSame([[false, false], []], $client->reserveMany('mail', 30, 0, [$first, 'j1']));
        // an ack with a stale receipt leaves the reservation alone
        $stale = new ReservedMessage('j2', 'mail', 'body2', 1, 25, '999999', 0.0);
        self::assertSame([[false], []], $client->reserveMany('mail', 30, 0, [$stale]));
        self::assertSame(['j2'], $this->redis->zRange('delayer:reserved', 0, -1));
        self::assertSame([[true], []], $client->reserveMany('other', 30, 5, [$jobs[0]]));
    }

    public function testBadArgumentsAreRefusedBeforeRedis(): void
    {
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 30, -1));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 30, 1001));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('', 30, 1));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 0, 1));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 30, 1, [1.5]));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 30, 1, ['']));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->reserveMany('t', 30, 1, array_fill(0, 1001, 'x')));
        try {
            $this->client()->reserveMany('t', 30, 1, ['a' => new \stdClass()]);
            self::fail('expected InvalidArgumentException');
        } catch (InvalidArgumentException $e) {
            self::assertSame("acks['a'] must be a ReservedMessage or a job id, got stdClass", $e->getMessage());
        }
    }

    public function testReleaseKeepsTheErrorOnTheJob(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('r', 'mail', 'x')->withMaxAttempts(2), 0);
        $this->moveDue(1);
        $job = $client->reserve('mail', 30);
        self::assertTrue($client->release($job, 0, error: 'RuntimeException: smtp timeout'));
        self::assertSame('RuntimeException: smtp timeout', $this->redis->hGet('delayer:job_bucket:r', 'last_error'));

        // the last attempt goes dead with its error; dead letters say why
        $this->moveDue(1);
        $job = $client->reserve('mail', 30);
        self::assertTrue($client->release($job, null, null, 'LogicException: bad address'));
        [$letter] = $client->deadLetters('mail');
        self::assertSame(['r', DeadLetter::MAX_ATTEMPTS], [$letter->id, $letter->reason]);
        self::assertSame('LogicException: bad address', $this->redis->hGet('delayer:job_bucket:r', 'last_error'));
    }

    public function testBuryKeepsTheErrorCutTo1000Bytes(): void
    {
        $client = $this->client();
        $client->pushTo('mail', 'b', 0, 'x');
        $client->pushTo('mail', 'quiet', 0, 'x');
        $this->moveDue(2);
        $job = $client->reserve('mail', 30);
        self::assertTrue($client->bury($job, error: str_repeat('e', 5000)));
        self::assertSame(str_repeat('e', 1000), $this->redis->hGet('delayer:job_bucket:b', 'last_error'));

        // without an error text: no last_error (1.x-shaped buckets stay so)
        $quiet = $client->reserve('mail', 30);
        self::assertTrue($client->bury($quiet->id));
        self::assertFalse($this->redis->hExists('delayer:job_bucket:quiet', 'last_error'));
    }

    private function evalshaCalls(): int
    {
        $stats = $this->redis->info('commandstats');
        preg_match('/calls=(\d+)/', (string) ($stats['cmdstat_evalsha'] ?? ''), $m);
        return (int) ($m[1] ?? 0);
    }

    public function testWithOwnConnectionIsASecondConnection(): void
    {
        $client = $this->client(['prefix' => 'p:']);
        $copy = $client->withOwnConnection();
        self::assertSame('p:', $copy->getKeys()->prefix());
        $copy->pushTo('t', 'x', 60);
        self::assertSame(1, $this->redis->zCard('p:job_pool'));
        $ids = static fn (\Redis $r): int => (int) $r->client('id');
        self::assertNotSame($ids($client->_driver), $ids($copy->_driver));
        $client->close(); // the copy's connection stays
        self::assertTrue($copy->remove('x'));
    }
}
