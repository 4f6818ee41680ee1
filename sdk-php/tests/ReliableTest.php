<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\Client;
use Delayer\DeadLetter;
use Delayer\Exception\RedisErrorException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;
use Delayer\ReservedMessage;
use Delayer\ScheduledMessage;
use Delayer\Validator;

/**
 * The at-least-once mode: retry settings on push, reserve / bReserve, ack,
 * touch, release, bury, reschedule and dead letters (docs/PROTOCOL.md, "Reserve and
 * ack"). No Delayer server runs here, so expiry of reservations (the
 * server's release.lua "expired" mode) is left to the conformance suite;
 * jobs are made ready with the repository's move.lua.
 */
final class ReliableTest extends RedisTestCase
{
    use BlockedChild;

    // ---- push with retry settings -----------------------------------------

    public function testPushWritesRetrySettingsOnlyWhenSet(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('plain', 't', 'b'), 10);
        $client->schedule(Message::create('both', 't', 'b')->withMaxAttempts(3)->withBackoff(Backoff::fixed(1.5)), 10);
        $client->schedule(Message::create('exp', 't', 'b')->withBackoff(Backoff::exponential(0.5, 60)), 10);
        $client->schedule(Message::create('nolimit', 't', 'b')->withMaxAttempts(0), 10);
        $client->schedule(new Message(['id' => 'array', 'topic' => 't', 'maxAttempts' => 7, 'backoff' => Backoff::exponential(2, 2)]), 10);

        self::assertSame(['topic' => 't', 'body' => 'b'], $this->redis->hGetAll('delayer:job_bucket:plain'));
        self::assertSame([
            'topic' => 't', 'body' => 'b', 'max_attempts' => '3',
            'backoff' => 'fixed', 'backoff_ms' => '1500', 'backoff_max_ms' => '1500',
        ], $this->redis->hGetAll('delayer:job_bucket:both'));
        self::assertSame([
            'topic' => 't', 'body' => 'b', 'backoff' => 'exponential', 'backoff_ms' => '500', 'backoff_max_ms' => '60000',
        ], $this->redis->hGetAll('delayer:job_bucket:exp'));
        self::assertSame(['topic' => 't', 'body' => 'b', 'max_attempts' => '0'], $this->redis->hGetAll('delayer:job_bucket:nolimit'));
        self::assertSame([
            'topic' => 't', 'body' => '', 'max_attempts' => '7',
            'backoff' => 'exponential', 'backoff_ms' => '2000', 'backoff_max_ms' => '2000',
        ], $this->redis->hGetAll('delayer:job_bucket:array'));
        // the TTL rules are unchanged
        self::assertEqualsWithDelta((10 + 604800) * 1000, $this->redis->pTtl('delayer:job_bucket:both'), 2000);
    }

    public function testWithersReturnCopies(): void
    {
        $message = Message::create('a', 't', 'b');
        $backoff = Backoff::fixed(3);
        $copy = $message->withMaxAttempts(5)->withBackoff($backoff);
        self::assertNull($message->maxAttempts);
        self::assertNull($message->getBackoff());
        self::assertSame(5, $copy->getMaxAttempts());
        self::assertSame($backoff, $copy->backoff);
        self::assertSame(['a', 't', 'b'], [$copy->id, $copy->topic, $copy->body]);
        self::assertNull($copy->withMaxAttempts(null)->withBackoff(null)->maxAttempts);
        self::assertSame(['fixed', 3000, 3000], [$backoff->kind, $backoff->backoffMs, $backoff->backoffMaxMs]);
        $exp = Backoff::exponential(1.2345, 3600);
        self::assertSame(['exponential', 1235, 3600000], [$exp->kind, $exp->backoffMs, $exp->backoffMaxMs]);
    }

    public function testPushManyCarriesRetrySettingsInNineValueStrides(): void
    {
        $client = $this->client();
        $jobs = [];
        for ($i = 0; $i < 120; $i++) { // two push_many.lua calls
            $message = Message::create("m:{$i}", 't', "b{$i}");
            if ($i % 3 === 1) {
                $message = $message->withMaxAttempts($i);
            }
            if ($i % 5 === 2) {
                $message = $message->withBackoff(Backoff::exponential($i / 1000, $i));
            }
            $jobs[] = $i % 2 === 0 ? [$message, 60] : new ScheduledMessage($message, 60, 120);
        }
        self::assertSame(120, $client->pushMany($jobs));
        self::assertSame(120, $this->redis->zCard('delayer:job_pool'));
        for ($i = 0; $i < 120; $i++) {
            $expected = ['topic' => 't', 'body' => "b{$i}"];
            if ($i % 3 === 1) {
                $expected['max_attempts'] = (string) $i;
            }
            if ($i % 5 === 2) {
                $expected += ['backoff' => 'exponential', 'backoff_ms' => (string) $i, 'backoff_max_ms' => (string) ($i * 1000)];
            }
            self::assertSame($expected, $this->redis->hGetAll("delayer:job_bucket:m:{$i}"), "job {$i}");
            $lifetime = $i % 2 === 0 ? 604800 : 120;
            self::assertEqualsWithDelta((60 + $lifetime) * 1000, $this->redis->pTtl("delayer:job_bucket:m:{$i}"), 2000);
        }
    }

    // ---- reserve -----------------------------------------------------------

    public function testReserveHandsOutTheJobReservedWithoutExpiry(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('r1', 'work', "bin\0body"));
        self::assertSame(1, $this->redis->lLen('delayer:ready_queue:work'));

        $before = $this->redisTime();
        $job = $client->reserve('work', 30);
        $after = $this->redisTime();

        self::assertInstanceOf(ReservedMessage::class, $job);
        self::assertSame(['r1', 'work', "bin\0body"], [$job->id, $job->topic, $job->body]);
        self::assertSame(['r1', 'work', "bin\0body"], [$job->getId(), $job->getTopic(), $job->getBody()]);
        self::assertSame(1, $job->attempts);
        self::assertSame(25, $job->maxAttempts, 'the default written by reserve.lua');
        self::assertFalse($job->isLastAttempt());
        self::assertSame('1', $job->receipt);
        self::assertGreaterThanOrEqual($before + 30 - 0.001, $job->deadline);
        self::assertLessThanOrEqual($after + 30 + 0.001, $job->deadline);

        self::assertSame(['r1'], $this->redis->zRange('delayer:reserved', 0, -1));
        self::assertEqualsWithDelta($job->deadline, $this->redis->zScore('delayer:reserved', 'r1') / 1000, 0.0005);
        self::assertSame(-1, $this->redis->pTtl('delayer:job_bucket:r1'), 'a reserved job is kept until acked');
        self::assertSame([
            'topic' => 'work', 'body' => "bin\0body", 'attempts' => '1', 'receipt' => '1',
        ], $this->redis->hGetAll('delayer:job_bucket:r1'), 'the retry defaults are not written (release.lua applies them)');
        self::assertSame(0, $this->redis->exists('delayer:ready_queue:work'));

        self::assertFalse($client->reserve('work', 30), 'invisible to other consumers');
        self::assertFalse($client->pop('work'));
        self::assertFalse($this->client()->reserve('work', 30));
    }

    public function testReserveUsesThePushedSettingsAndFreshReceipts(): void
    {
        $client = $this->client();
        $this->ready(
            $client,
            Message::create('a', 't')->withMaxAttempts(3),
            Message::create('b', 't')->withMaxAttempts(0),
        );
        $a = $client->reserve('t', 0.0005); // rounds up to 1 ms
        $b = $client->reserve('t', 315360000);
        self::assertSame(['a', 3, '1'], [$a->id, $a->maxAttempts, $a->receipt]);
        self::assertSame(['b', 0, '2'], [$b->id, $b->maxAttempts, $b->receipt]);
        self::assertSame('2', $this->redis->get('delayer:receipt_seq'));
        self::assertGreaterThan($a->deadline + 315359999, $b->deadline);
        $score = $this->redis->zScore('delayer:reserved', 'a') / 1000;
        self::assertEqualsWithDelta($a->deadline, $score, 0.0005);
        self::assertLessThan($this->redisTime() + 0.01, $score, 'ttr of 1 ms');
    }

    public function testReserveSkipsGoneAndParksMalformedIds(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('live', 't', 'x'));
        $this->redis->rPush('delayer:ready_queue:t', 'gone', 'notopic'); // at the right end: met first
        $this->redis->hSet('delayer:job_bucket:notopic', 'body', 'b');
        $job = $client->reserve('t', 10);
        self::assertSame('live', $job->id);
        self::assertSame(['notopic'], $this->redis->lRange('delayer:malformed', 0, -1));
        self::assertSame(['body' => 'b'], $this->redis->hGetAll('delayer:job_bucket:notopic'), 'bucket kept');
        self::assertSame(['live'], $this->redis->zRange('delayer:reserved', 0, -1));
    }

    public function testReserveFailingInRedisLosesNothing(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('keep', 't', 'x'));
        $this->redis->set('delayer:reserved', 'not a zset');
        foreach ([static fn () => $client->reserve('t', 5), static fn () => $client->bReserve('t', 5, 1)] as $call) {
            try {
                $call();
                self::fail('expected RedisErrorException');
            } catch (RedisErrorException $e) {
                self::assertStringContainsString('WRONGTYPE', $e->getMessage());
            }
            self::assertSame(['keep'], $this->redis->lRange('delayer:ready_queue:t', 0, -1), 'the id is put back');
            self::assertSame(['topic' => 't', 'body' => 'x'], $this->redis->hGetAll('delayer:job_bucket:keep'));
        }
    }

    // ---- ack ---------------------------------------------------------------

    public function testAckWithTheReceiptDeletesTheJob(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('done', 't', 'x'));
        $job = $client->reserve('t', 30);
        self::assertTrue($client->ack($job));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:done'));
        self::assertSame(0, $this->redis->exists('delayer:reserved'));
        self::assertFalse($client->ack($job), 'a second ack finds nothing held');
        self::assertFalse($client->ack('done'));
        self::assertFalse($client->ack('never-pushed'));
    }

    public function testAckByIdWithOrWithoutReceipt(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('x', 't'), Message::create('y', 't'));
        $x = $client->reserve('t', 30);
        $y = $client->reserve('t', 30);
        self::assertFalse($client->ack('x', $y->receipt), "another reservation's receipt");
        self::assertFalse($client->ack('x', 'no-such-receipt'));
        self::assertSame(1, $this->redis->exists('delayer:job_bucket:x'), 'a refused ack changes nothing');
        self::assertNotFalse($this->redis->zScore('delayer:reserved', 'x'));
        self::assertTrue($client->ack('x', $x->receipt));
        self::assertTrue($client->ack('y'), 'no receipt: whichever reservation is current');
        self::assertEqualsCanonicalizing(['delayer:receipt_seq', 'delayer:topics', 'delayer:outcomes'], $this->redis->keys('*'), 'only the receipt counter, the topics moved and the outcome counts are left');
        self::assertSame(['acked:t' => '2'], $this->redis->hGetAll('delayer:outcomes'), 'each ack counted once, a refused one not');
    }

    public function testAStaleReservationCannotEndTheNextOne(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('j', 't', 'x'));
        $first = $client->reserve('t', 30);
        self::assertTrue($client->release($first, 0));
        $this->makeReady('j');
        $second = $client->reserve('t', 30);
        self::assertSame(2, $second->attempts);
        self::assertNotSame($first->receipt, $second->receipt);

        self::assertFalse($client->ack($first));
        self::assertFalse($client->release($first, 0));
        self::assertFalse($client->bury($first));
        self::assertSame($second->receipt, $this->redis->hGet('delayer:job_bucket:j', 'receipt'));
        self::assertTrue($client->ack($second));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:j'));
    }

    // ---- touch -------------------------------------------------------------

    public function testTouchSetsANewDeadlineForTheHolderOnly(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('a', 't'));
        $job = $client->reserve('t', 5);

        $before = $this->redisTime();
        $deadline = $client->touch($job, 600);
        self::assertIsFloat($deadline);
        $stored = $this->redis->zScore('delayer:reserved', 'a') / 1000;
        self::assertIsFloat($stored);
        self::assertEqualsWithDelta($stored, $deadline, 0.002, 'the deadline returned is the one stored');
        self::assertEqualsWithDelta($before + 600, $stored, 0.5, 'now + ttr');
        self::assertEqualsWithDelta($before + 5, $job->deadline, 0.5, 'the ReservedMessage keeps the deadline reserve() gave');

        // set, not added to: a shorter ttr brings the deadline in
        $shorter = $client->touch('a', 10);
        self::assertIsFloat($shorter);
        self::assertLessThan($deadline, $shorter);
        self::assertEqualsWithDelta($shorter, $this->redis->zScore('delayer:reserved', 'a') / 1000, 0.002);
        self::assertSame('1', $this->redis->hGet('delayer:job_bucket:a', 'attempts'), 'still the first attempt');

        self::assertFalse($client->touch('a', 1, 'other'), 'a wrong receipt');
        self::assertEqualsWithDelta($shorter, $this->redis->zScore('delayer:reserved', 'a') / 1000, 0.002, 'a refused touch changes nothing');
        self::assertFalse($client->touch('unknown', 1));
        self::assertTrue($client->ack($job));
        self::assertFalse($client->touch($job, 1), 'after ack');
        self::assertSame(0, $this->redis->zCard('delayer:reserved'), 'a late touch adds nothing');
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:a'));
    }

    public function testTouchByIdWithTheReceiptAndAfterAStaleReservation(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('j', 't'));
        $first = $client->reserve('t', 30);
        self::assertIsFloat($client->touch('j', 60, $first->receipt));
        self::assertTrue($client->release($first, 0));
        self::assertFalse($client->touch($first, 60), 'released: not held');
        $this->makeReady('j');
        $second = $client->reserve('t', 30);
        self::assertFalse($client->touch($first, 600), 'a stale receipt cannot extend the next reservation');
        self::assertEqualsWithDelta($second->deadline, $this->redis->zScore('delayer:reserved', 'j') / 1000, 0.002);
        self::assertIsFloat($client->touch($second, 0.0005), 'rounds to 1 ms');
        self::assertSame('2', $this->redis->hGet('delayer:job_bucket:j', 'attempts'));
    }

    // ---- release -----------------------------------------------------------

    public function testReleaseWithADelayPutsTheJobBackInThePool(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('again', 't', 'x'));
        $job = $client->reserve('t', 30);
        $before = $this->redisTime();
        self::assertTrue($client->release($job, 12.5));
        $after = $this->redisTime();

        $score = $this->redis->zScore('delayer:job_pool', 'again');
        self::assertGreaterThanOrEqual($before + 12.5 - 0.001, $score);
        self::assertLessThanOrEqual($after + 12.5 + 0.001, $score);
        self::assertSame(0, $this->redis->exists('delayer:reserved'));
        self::assertFalse($this->redis->hExists('delayer:job_bucket:again', 'receipt'));
        self::assertSame('1', $this->redis->hGet('delayer:job_bucket:again', 'attempts'));
        self::assertFalse($client->release($job, 1), 'not held any more');
        self::assertEqualsWithDelta($score, $this->redis->zScore('delayer:job_pool', 'again'), 0.0005, 'unchanged');

        // once due again, it is reserved again, attempts counting on
        $this->makeReady('again');
        $next = $client->reserve('t', 30);
        self::assertSame(['again', 2], [$next->id, $next->attempts]);
        self::assertTrue($client->release('again', 0), 'by id, no receipt');
        self::assertLessThanOrEqual($this->redisTime() + 0.001, $this->redis->zScore('delayer:job_pool', 'again'));
    }

    /** @return iterable<string, array{?Backoff, list<float>}> */
    public static function backoffs(): iterable
    {
        yield 'default: exponential from 1 s' => [null, [1, 2, 4]];
        yield 'fixed' => [Backoff::fixed(30), [30, 30, 30]];
        yield 'exponential with a cap' => [Backoff::exponential(2, 5), [2, 4, 5]];
        yield 'exponential, fractions' => [Backoff::exponential(0.25, 3600), [0.25, 0.5, 1]];
    }

    /**
     * @dataProvider backoffs
     * @param list<float> $waits the wait after attempts 1, 2, 3
     */
    public function testReleaseWithoutADelayUsesTheBackoff(?Backoff $backoff, array $waits): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('b', 't')->withBackoff($backoff));
        foreach ($waits as $n => $wait) {
            $job = $client->reserve('t', 30);
            self::assertSame($n + 1, $job->attempts);
            $before = $this->redisTime();
            self::assertTrue($client->release($job));
            $after = $this->redisTime();
            $score = $this->redis->zScore('delayer:job_pool', 'b');
            self::assertGreaterThanOrEqual($before + $wait - 0.001, $score, "after attempt {$job->attempts}");
            self::assertLessThanOrEqual($after + $wait + 0.001, $score, "after attempt {$job->attempts}");
            $this->makeReady('b');
        }
    }

    public function testReleasePastMaxAttemptsSendsTheJobToDeadLetters(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('flaky', 'mail', 'body')->withMaxAttempts(2));
        $job = $client->reserve('mail', 30);
        self::assertTrue($client->release($job, 0));
        $this->makeReady('flaky');
        $job = $client->reserve('mail', 30);
        self::assertSame(2, $job->attempts);
        self::assertTrue($job->isLastAttempt());
        $before = $this->redisTime();
        self::assertTrue($client->release($job, 0, error: 'smtp timeout'), 'true: the reservation was held, the job is dead');
        $after = $this->redisTime();

        self::assertSame(['flaky'], $this->redis->lRange('delayer:dead:mail', 0, -1));
        self::assertFalse($this->redis->zScore('delayer:job_pool', 'flaky'));
        self::assertSame(0, $this->redis->exists('delayer:reserved'));
        self::assertSame('max_attempts', $this->redis->hGet('delayer:job_bucket:flaky', 'dead_reason'));
        self::assertFalse($this->redis->hExists('delayer:job_bucket:flaky', 'receipt'));
        self::assertSame(-1, $this->redis->pTtl('delayer:job_bucket:flaky'), 'dead jobs are kept');

        $dead = $client->deadLetters('mail');
        self::assertCount(1, $dead);
        self::assertInstanceOf(DeadLetter::class, $dead[0]);
        self::assertSame(['flaky', 'mail', 'body', 2, DeadLetter::MAX_ATTEMPTS], [
            $dead[0]->id, $dead[0]->topic, $dead[0]->body, $dead[0]->attempts, $dead[0]->reason,
        ]);
        self::assertSame('smtp timeout', $dead[0]->lastError);
        self::assertGreaterThanOrEqual(floor($before * 1000) / 1000, $dead[0]->deadAt);
        self::assertLessThanOrEqual($after + 0.001, $dead[0]->deadAt);
        self::assertFalse($client->reserve('mail', 30));
    }

    public function testMaxAttemptsZeroRetriesForever(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('forever', 't')->withMaxAttempts(0));
        for ($n = 1; $n <= 30; $n++) { // past the default of 25
            $job = $client->reserve('t', 30);
            self::assertSame([$n, 0], [$job->attempts, $job->maxAttempts]);
            self::assertTrue($client->release($job, 0));
            $this->makeReady('forever');
        }
        self::assertSame(0, $this->redis->exists('delayer:dead:t'));
    }

    public function testBuryGivesUpWhateverTheAttempts(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('poison', 't', 'p'), Message::create('byid', 't', 'q'));
        $job = $client->reserve('t', 30);
        self::assertSame(1, $job->attempts);
        self::assertTrue($client->bury($job));
        self::assertFalse($client->bury($job), 'not held any more');
        $other = $client->reserve('t', 30);
        self::assertFalse($client->bury('byid', 'wrong'));
        self::assertTrue($client->bury('byid', $other->receipt));

        self::assertSame(['byid', 'poison'], $this->redis->lRange('delayer:dead:t', 0, -1));
        self::assertSame('buried', $this->redis->hGet('delayer:job_bucket:poison', 'dead_reason'));
        self::assertSame(0, $this->redis->exists('delayer:reserved'));
        self::assertSame(0, $this->redis->zCard('delayer:job_pool'));
        $reasons = array_map(static fn (DeadLetter $d): array => [$d->id, $d->reason, $d->attempts], $client->deadLetters('t'));
        self::assertSame([['byid', DeadLetter::BURIED, 1], ['poison', DeadLetter::BURIED, 1]], $reasons);
    }

    public function testPopTakesAJobBetweenRetriesAtMostOnce(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('mixed', 't', 'x'));
        self::assertTrue($client->release($client->reserve('t', 30), 0));
        $this->makeReady('mixed');
        $message = $client->pop('t');
        self::assertSame(['mixed', 'x'], [$message->id, $message->body]);
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:mixed'));
    }

    // ---- dead letters ------------------------------------------------------

    public function testDeadLettersAreListedNewestFirstAndSkipStaleEntries(): void
    {
        $client = $this->client();
        $this->buryAll($client, 'd', 'a', 'b', 'c');
        $ids = static fn (array $letters): array => array_map(static fn (DeadLetter $d): string => $d->id, $letters);
        self::assertSame(['c', 'b', 'a'], $ids($client->deadLetters('d')));
        self::assertSame(['b'], $ids($client->deadLetters('d', 1, 1)));
        self::assertSame(['b', 'a'], $ids($client->deadLetters('d', 1, 1000)));
        self::assertSame([], $client->deadLetters('d', 3));
        self::assertSame([], $client->deadLetters('d', Validator::MAX_POSITION, 1000));
        self::assertSame([], $client->deadLetters('other'));

        self::assertTrue($client->remove('b'));
        self::assertSame(['c', 'a'], $ids($client->deadLetters('d')), 'a removed job is stale');
        $client->schedule(Message::create('a', 'd', 'new'), 60);
        self::assertSame(['c'], $ids($client->deadLetters('d')), 'so is one pushed again');
    }

    public function testRequeueDeadResetsAttemptsAndSchedulesNow(): void
    {
        $client = $this->client();
        $this->buryAll($client, 'd', 'a', 'b', 'c', 'stale');
        $client->remove('stale');
        $before = $this->redisTime();
        self::assertSame(3, $client->requeueDead('d'), 'the stale entry is dropped, not counted');
        $after = $this->redisTime();
        self::assertSame(0, $this->redis->exists('delayer:dead:d'));
        self::assertSame([], $client->deadLetters('d'));
        foreach (['a', 'b', 'c'] as $id) {
            $score = $this->redis->zScore('delayer:job_pool', $id);
            self::assertGreaterThanOrEqual(floor($before * 1000) / 1000, $score);
            self::assertLessThanOrEqual($after + 0.001, $score);
            $bucket = $this->redis->hGetAll("delayer:job_bucket:{$id}");
            self::assertSame('0', $bucket['attempts']);
            self::assertArrayNotHasKey('dead_reason', $bucket);
            self::assertArrayNotHasKey('dead_at', $bucket);
        }
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:stale'), 'left alone');
        self::assertSame(0, $client->requeueDead('d'), 'nothing left');

        $this->moveDue(3);
        $job = $client->reserve('d', 30);
        self::assertSame(1, $job->attempts, 'a re-queued job gets its full max_attempts again');
    }

    public function testRequeueAndPurgeDeadByIds(): void
    {
        $client = $this->client();
        $this->buryAll($client, 'd', 'a', 'b', 'c', 'e');
        self::assertSame(0, $client->requeueDead('d', []), 'an empty list sends nothing');
        self::assertSame(2, $client->requeueDead('d', ['a', 'c', 'a', 'unknown']));
        self::assertSame(['a', 'c'], $this->redis->zRange('delayer:job_pool', 0, -1));
        self::assertSame(['e', 'b'], $this->redis->lRange('delayer:dead:d', 0, -1));

        self::assertSame(1, $client->purgeDead('d', ['b', 'a']), 'a is not dead any more');
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:b'));
        self::assertSame(1, $this->redis->exists('delayer:job_bucket:a'), 'a live job is not purged');
        self::assertSame(['e'], $this->redis->lRange('delayer:dead:d', 0, -1));
        self::assertSame(0, $client->purgeDead('d', []));
        self::assertSame(1, $client->purgeDead('d'));
        self::assertSame(0, $this->redis->exists('delayer:job_bucket:e'));
        self::assertSame(0, $this->redis->exists('delayer:dead:d'));
    }

    public function testAllAndLongIdListsGoInCallsOfAThousand(): void
    {
        $client = $this->client();
        $this->fakeDead('big', 1500);
        self::assertSame(0, $client->requeueDead('empty')); // loads dead.lua
        $this->redis->rawCommand('CONFIG', 'RESETSTAT');
        self::assertSame(1500, $client->requeueDead('big'));
        self::assertStringContainsString('calls=2,', (string) $this->redis->info('commandstats')['cmdstat_evalsha']);
        self::assertSame(1500, $this->redis->zCard('delayer:job_pool'));
        self::assertSame(0, $this->redis->exists('delayer:dead:big'));

        // The pool emptied by hand: its per-topic count too (move.lua would).
        $this->redis->del('delayer:job_pool', 'delayer:scheduled_count');
        $this->fakeDead('big', 2500);
        $ids = array_map(static fn (int $i): string => "big:{$i}", range(0, 2499));
        $this->redis->rawCommand('CONFIG', 'RESETSTAT');
        self::assertSame(2500, $client->purgeDead('big', $ids));
        self::assertStringContainsString('calls=3,', (string) $this->redis->info('commandstats')['cmdstat_evalsha']);
        self::assertSame(0, $this->redis->exists('delayer:dead:big', 'delayer:job_bucket:big:0', 'delayer:job_bucket:big:2499'));

        $this->fakeDead('big', 1000);
        self::assertSame(1000, $client->purgeDead('big'), 'exactly a full call, then an empty one');
        self::assertSame(0, $this->redis->dbSize());
    }

    // ---- reschedule --------------------------------------------------------

    public function testRescheduleMovesTheDueTimeAndTheExpiry(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('w', 't'), 10, 100);
        $before = $this->redisTime();
        $due = $client->reschedule('w', 50);
        $after = $this->redisTime();
        self::assertIsFloat($due);
        self::assertGreaterThanOrEqual($before + 50 - 0.001, $due);
        self::assertLessThanOrEqual($after + 50 + 0.001, $due);
        self::assertEqualsWithDelta($due, $this->redis->zScore('delayer:job_pool', 'w'), 0.0005);
        self::assertEqualsWithDelta(150000, $this->redis->pTtl('delayer:job_bucket:w'), 2000, 'same lifetime after the due time');

        $due = $client->reschedule('w', 0.25);
        self::assertEqualsWithDelta($due, $this->redis->zScore('delayer:job_pool', 'w'), 0.0005);
        self::assertEqualsWithDelta(100250, $this->redis->pTtl('delayer:job_bucket:w'), 2000);
    }

    public function testRescheduleOnlyTouchesWaitingJobs(): void
    {
        $client = $this->client();
        self::assertFalse($client->reschedule('unknown', 5));
        $this->ready($client, Message::create('ready', 't'));
        self::assertFalse($client->reschedule('ready', 5), 'in its ready queue');
        self::assertSame(0, $this->redis->zCard('delayer:job_pool'), 'not resurrected');

        $job = $client->reserve('t', 30);
        self::assertFalse($client->reschedule('ready', 5), 'reserved');
        self::assertSame(0, $this->redis->zCard('delayer:job_pool'));

        // between retries it waits in the pool: reschedulable, still without expiry
        self::assertTrue($client->release($job, 3600));
        $due = $client->reschedule('ready', 1);
        self::assertEqualsWithDelta($this->redisTime() + 1, $due, 0.5);
        self::assertSame(-1, $this->redis->pTtl('delayer:job_bucket:ready'));

        $client->schedule(Message::create('gone', 't'), 60);
        $client->remove('gone');
        self::assertFalse($client->reschedule('gone', 5));
    }

    // ---- bReserve ----------------------------------------------------------

    public function testBReserveReturnsAReadyJobAtOnce(): void
    {
        $client = $this->client(['timeout' => 0.5]);
        $this->ready($client, Message::create('now', 't', 'x'), Message::create('next', 't', 'y'));
        $start = microtime(true);
        $job = $client->bReserve('t', 30, 5);
        self::assertLessThan(1.0, microtime(true) - $start);
        self::assertSame(['now', 'x', 1], [$job->id, $job->body, $job->attempts]);
        self::assertSame(['next'], $this->redis->lRange('delayer:ready_queue:t', 0, -1), 'the wait took nothing else');
        $job = $client->bReserve('t', 30); // 0: forever, but a job is ready
        self::assertSame('next', $job->id);
        $reserved = $this->redis->zRange('delayer:reserved', 0, -1);
        sort($reserved);
        self::assertSame(['next', 'now'], $reserved);
        self::assertFalse($client->reserve('t', 30), 'the read timeout is restored and the connection usable');
    }

    public function testBReserveTimesOutWithFalseAndDropsStaleIds(): void
    {
        $client = $this->client();
        $this->redis->lPush('delayer:ready_queue:t', 'ghost'); // no bucket: dropped, then waits again
        $start = microtime(true);
        self::assertFalse($client->bReserve('t', 30, 0.2));
        $elapsed = microtime(true) - $start;
        self::assertGreaterThanOrEqual(0.2, $elapsed);
        self::assertLessThan(1.5, $elapsed);
        self::assertSame(0, $this->redis->exists('delayer:ready_queue:t'));
        self::assertSame(0, $this->redis->exists('delayer:reserved'));
        self::assertFalse($client->reserve('t', 30), 'the connection is still healthy');
    }

    public function testBReserveWaitsLongerThanTheReadTimeout(): void
    {
        $client = $this->client(['timeout' => 0.2]);
        $start = microtime(true);
        self::assertFalse($client->bReserve('t', 30, 0.5));
        self::assertGreaterThanOrEqual(0.5, microtime(true) - $start);
        self::assertFalse($client->reserve('t', 30));
    }

    public function testBReserveWakesWhenAJobBecomesReady(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('late', 't', 'woke'), 3600);
        // Another process makes the job ready (as the server's move would)
        // once it sees our connection blocked.
        $child = $this->whenBlocked(['ZREM', 'delayer:job_pool', 'late'], ['LPUSH', 'delayer:ready_queue:t', 'late']);
        $start = microtime(true);
        $job = $client->bReserve('t', 30, 10);
        $elapsed = microtime(true) - $start;
        self::assertSame(0, $this->waitForChild($child)[0], 'the helper saw bReserve blocked, then pushed');
        self::assertInstanceOf(ReservedMessage::class, $job);
        self::assertSame(['late', 'woke', 1], [$job->id, $job->body, $job->attempts]);
        self::assertLessThan(9, $elapsed);
        self::assertSame(['late'], $this->redis->zRange('delayer:reserved', 0, -1));
    }

    public function testBReserveWaitsOnPastAStaleIdAndTakesTheNextJob(): void
    {
        $client = $this->client();
        $client->schedule(Message::create('real', 't', 'r'), 3600);
        $child = $this->whenBlocked(
            ['LPUSH', 'delayer:ready_queue:t', 'ghost'],
            ['ZREM', 'delayer:job_pool', 'real'],
            ['LPUSH', 'delayer:ready_queue:t', 'real'],
        );
        $job = $client->bReserve('t', 30, 10);
        self::assertSame(0, $this->waitForChild($child)[0]);
        self::assertSame('real', $job->id);
        self::assertSame(0, $this->redis->exists('delayer:ready_queue:t'), 'the ghost was dropped');
    }

    // ---- prefix, scripts ---------------------------------------------------

    public function testTheReliableKeysHonourThePrefix(): void
    {
        $client = $this->client(['prefix' => 'shop:']);
        $keys = $client->getKeys();
        self::assertSame(['shop:reserved', 'shop:dead:mail', 'shop:receipt_seq'], [$keys->reserved(), $keys->dead('mail'), $keys->receiptSeq()]);
        $client->schedule(Message::create('p', 'mail', 'x'), 0);
        $this->moveDue(1, 'shop:');
        $job = $client->reserve('mail', 30);
        self::assertSame(['p'], $this->redis->zRange('shop:reserved', 0, -1));
        self::assertSame('1', $this->redis->get('shop:receipt_seq'));
        self::assertTrue($client->bury($job));
        self::assertSame(['p'], $this->redis->lRange('shop:dead:mail', 0, -1));
        self::assertSame('p', $client->deadLetters('mail')[0]->id);
        self::assertSame([], $this->client()->deadLetters('mail'), 'the default prefix sees nothing');
        self::assertSame(1, $client->requeueDead('mail'));
        self::assertSame(['p'], $this->redis->zRange('shop:job_pool', 0, -1));
        self::assertSame(0, $this->redis->exists('delayer:reserved', 'delayer:receipt_seq', 'delayer:job_pool'));
    }

    public function testTheScriptsAreLoadedAgainAfterScriptFlush(): void
    {
        $client = $this->client();
        $this->ready($client, Message::create('a', 't'), Message::create('b', 't'));
        $a = $client->reserve('t', 30);
        $this->redis->script('flush');
        self::assertTrue($client->ack($a));
        $b = $client->reserve('t', 30);
        $this->redis->script('flush');
        self::assertNotFalse($client->touch($b, 60));
        $this->redis->script('flush');
        self::assertTrue($client->release($b, 10));
        $this->redis->script('flush');
        self::assertNotFalse($client->reschedule('b', 20));
        $this->redis->script('flush');
        self::assertSame([], $client->deadLetters('t'));
    }

    // ---- input rules -------------------------------------------------------

    /** @return iterable<string, array{\Closure(Client): mixed}> */
    public static function invalidCalls(): iterable
    {
        $held = new ReservedMessage('a', 't', '', 1, 25, '1', 0.0);
        yield 'reserve: ttr 0' => [static fn (Client $c) => $c->reserve('t', 0)];
        yield 'reserve: ttr 0.0' => [static fn (Client $c) => $c->reserve('t', 0.0)];
        yield 'reserve: negative ttr' => [static fn (Client $c) => $c->reserve('t', -1)];
        yield 'reserve: ttr under 0.5 ms' => [static fn (Client $c) => $c->reserve('t', 0.0004)];
        yield 'reserve: ttr over 10 years' => [static fn (Client $c) => $c->reserve('t', 315360000.001)];
        yield 'reserve: NaN ttr' => [static fn (Client $c) => $c->reserve('t', NAN)];
        yield 'reserve: infinite ttr' => [static fn (Client $c) => $c->reserve('t', INF)];
        yield 'reserve: bad topic' => [static fn (Client $c) => $c->reserve('', 1)];
        yield 'bReserve: ttr 0' => [static fn (Client $c) => $c->bReserve('t', 0, 0.1)];
        yield 'bReserve: negative timeout' => [static fn (Client $c) => $c->bReserve('t', 1, -0.1)];
        yield 'bReserve: NaN timeout' => [static fn (Client $c) => $c->bReserve('t', 1, NAN)];
        yield 'bReserve: bad topic' => [static fn (Client $c) => $c->bReserve('', 1, 0.1)];
        yield 'ack: empty id' => [static fn (Client $c) => $c->ack('')];
        yield 'ack: empty receipt' => [static fn (Client $c) => $c->ack('a', '')];
        yield 'ack: a ReservedMessage and a receipt' => [static fn (Client $c) => $c->ack($held, '1')];
        yield 'touch: ttr 0' => [static fn (Client $c) => $c->touch('a', 0)];
        yield 'touch: ttr 0.0' => [static fn (Client $c) => $c->touch($held, 0.0)];
        yield 'touch: negative ttr' => [static fn (Client $c) => $c->touch('a', -1)];
        yield 'touch: ttr under 0.5 ms' => [static fn (Client $c) => $c->touch('a', 0.0004)];
        yield 'touch: ttr over 10 years' => [static fn (Client $c) => $c->touch('a', 315360000.001)];
        yield 'touch: NaN ttr' => [static fn (Client $c) => $c->touch('a', NAN)];
        yield 'touch: bad id' => [static fn (Client $c) => $c->touch('', 1)];
        yield 'touch: empty receipt' => [static fn (Client $c) => $c->touch('a', 1, '')];
        yield 'touch: a ReservedMessage and a receipt' => [static fn (Client $c) => $c->touch($held, 1, '1')];
        yield 'release: negative delay' => [static fn (Client $c) => $c->release('a', -1)];
        yield 'release: delay over 10 years' => [static fn (Client $c) => $c->release($held, 315360001)];
        yield 'release: NaN delay' => [static fn (Client $c) => $c->release('a', NAN)];
        yield 'release: bad id' => [static fn (Client $c) => $c->release('')];
        yield 'release: a ReservedMessage and a receipt' => [static fn (Client $c) => $c->release($held, null, '1')];
        yield 'bury: bad id' => [static fn (Client $c) => $c->bury('')];
        yield 'bury: empty receipt' => [static fn (Client $c) => $c->bury('a', '')];
        yield 'reschedule: negative delay' => [static fn (Client $c) => $c->reschedule('a', -0.001)];
        yield 'reschedule: delay over 10 years' => [static fn (Client $c) => $c->reschedule('a', 315360000.001)];
        yield 'reschedule: bad id' => [static fn (Client $c) => $c->reschedule('', 1)];
        yield 'deadLetters: count 0' => [static fn (Client $c) => $c->deadLetters('t', 0, 0)];
        yield 'deadLetters: count 1001' => [static fn (Client $c) => $c->deadLetters('t', 0, 1001)];
        yield 'deadLetters: negative start' => [static fn (Client $c) => $c->deadLetters('t', -1)];
        yield 'deadLetters: bad topic' => [static fn (Client $c) => $c->deadLetters('')];
        yield 'requeueDead: bad id' => [static fn (Client $c) => $c->requeueDead('t', ['ok', ''])];
        yield 'requeueDead: not a string' => [static fn (Client $c) => $c->requeueDead('t', ['ok', 4.2])];
        yield 'requeueDead: bad topic' => [static fn (Client $c) => $c->requeueDead('')];
        yield 'purgeDead: bad id' => [static fn (Client $c) => $c->purgeDead('t', [null])];
        yield 'purgeDead: bad id after 1000 good ones' => [static fn (Client $c) => $c->purgeDead(
            't',
            [...array_map(static fn (int $i): string => "ok:{$i}", range(1, 1000)), '']
        )];
        yield 'purgeDead: bad topic' => [static fn (Client $c) => $c->purgeDead('')];
        yield 'maxAttempts -1' => [static fn (Client $c) => Message::create('a', 't')->withMaxAttempts(-1)];
        yield 'maxAttempts 1000001' => [static fn (Client $c) => Message::create('a', 't')->withMaxAttempts(1000001)];
        yield 'maxAttempts in the array' => [static fn (Client $c) => new Message(['id' => 'a', 'maxAttempts' => 1000001])];
        yield 'maxAttempts as a string' => [static fn (Client $c) => new Message(['id' => 'a', 'maxAttempts' => '5'])];
        yield 'backoff of the wrong type' => [static fn (Client $c) => new Message(['id' => 'a', 'backoff' => 5])];
        yield 'push: maxAttempts set out of range' => [static function (Client $c): void {
            $message = Message::create('a', 't');
            $message->maxAttempts = -1;
            $c->schedule($message, 1);
        }];
        yield 'pushMany: maxAttempts set out of range' => [static function (Client $c): void {
            $message = Message::create('b', 't');
            $message->maxAttempts = 1000001;
            $c->pushMany([[Message::create('a', 't'), 1], [$message, 1]]);
        }];
        yield 'exponential: max below base' => [static fn (Client $c) => Backoff::exponential(5, 1)];
        yield 'exponential: negative base' => [static fn (Client $c) => Backoff::exponential(-1, 1)];
        yield 'exponential: max over 10 years' => [static fn (Client $c) => Backoff::exponential(1, 315360001)];
        yield 'fixed: negative' => [static fn (Client $c) => Backoff::fixed(-0.5)];
        yield 'fixed: infinite' => [static fn (Client $c) => Backoff::fixed(INF)];
    }

    /**
     * @dataProvider invalidCalls
     * @param \Closure(Client): mixed $call
     */
    public function testValidationErrorsTouchNothing(\Closure $call): void
    {
        $this->assertRejectedBeforeRedis($call);
    }

    public function testEdgeOfValidInput(): void
    {
        $client = $this->client();
        self::assertFalse($client->reserve('t', 0.0005), 'rounds to 1 ms');
        self::assertFalse($client->reserve('t', 315360000));
        self::assertFalse($client->bReserve('t', 1, 0.0001), 'a remainder under 1 ms waits 1 ms');
        self::assertSame(1000000, Message::create('a', 't')->withMaxAttempts(1000000)->maxAttempts);
        self::assertSame(0, Backoff::exponential(0, 0)->backoffMaxMs);
        self::assertSame(315360000000, Backoff::fixed(315360000)->backoffMs);
        self::assertSame([1000, 1000], [Backoff::exponential(1.0004, 1.0001)->backoffMs, Backoff::exponential(1.0004, 1.0001)->backoffMaxMs], 'compared as sent, in ms');
        self::assertSame([], $client->deadLetters('t', 0, 1000));
        self::assertSame([], $client->deadLetters('t', 0, 1));
        self::assertTrue(Message::create('a', 't', 'b')->withMaxAttempts(1)->validate());
        $message = Message::create('a', 't', 'b');
        $message->maxAttempts = -1;
        self::assertFalse($message->validate());
    }

    // ---- helpers -----------------------------------------------------------

    /**
     * Pushes the messages due now, 2 ms apart (so they are reserved in the
     * order given), and plays the server until they are ready.
     */
    private function ready(Client $client, Message ...$messages): void
    {
        foreach ($messages as $i => $message) {
            $client->schedule($message, $i * 0.002);
        }
        $this->moveDue(\count($messages));
    }

    /** Makes jobs waiting in the pool (between retries) due now and moves them. */
    private function makeReady(string ...$ids): void
    {
        foreach ($ids as $id) {
            self::assertSame(1, $this->redis->zAdd('delayer:job_pool', ['XX', 'CH'], 0, $id), "{$id} must be waiting");
        }
        $this->moveDue(\count($ids));
    }

    /** Pushes, reserves and buries each id, in order. */
    private function buryAll(Client $client, string $topic, string ...$ids): void
    {
        foreach ($ids as $id) {
            $this->ready($client, Message::create($id, $topic, "body of {$id}"));
            self::assertTrue($client->bury($client->reserve($topic, 30)));
        }
    }

    /** Writes $count dead letters <topic>:<i> as release.lua leaves them. */
    private function fakeDead(string $topic, int $count): void
    {
        $this->redis->pipeline();
        for ($i = 0; $i < $count; $i++) {
            $this->redis->hMSet("delayer:job_bucket:{$topic}:{$i}", [
                'topic' => $topic, 'body' => 'x', 'attempts' => '1', 'dead_reason' => 'buried', 'dead_at' => '1.000',
            ]);
            $this->redis->lPush("delayer:dead:{$topic}", "{$topic}:{$i}");
        }
        $this->redis->exec();
        self::assertSame($count, $this->redis->lLen("delayer:dead:{$topic}"));
    }
}
