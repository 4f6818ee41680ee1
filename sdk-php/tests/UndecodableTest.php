<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Job;
use Delayer\Message;
use Delayer\ReservedMessage;
use Delayer\Worker;

/**
 * No call destroys a job whose names are not UTF-8 (issue 20, item 11): PHP
 * strings are bytes, so an id or topic written by a Delayer 1.x client (a
 * Latin-1 topic, a binary id) is handed out byte for byte and taken back by
 * every call: pop, bPop, reserve, ack, touch, release, bury, dead letters,
 * lookups, listings, stats and the Worker, in both key layouts. Jobs are
 * written with raw commands; their bodies are not UTF-8 either.
 */
final class UndecodableTest extends RedisTestCase
{
    private const ID = "order-\xe9-\x80-\xe2\x82";
    private const TOPIC = "caf\xe9";
    private const BODY = "\xff\xfe body";

    /** @return array<string, array{0: string}> */
    public static function layouts(): array
    {
        return ['classic' => ['classic'], 'topic' => ['topic']];
    }

    private function layoutClient(string $layout): Client
    {
        return $layout === 'topic' ? $this->client(['layout' => 'topic', 'prefix' => 'u:']) : $this->client();
    }

    private static function key(string $layout, string $topic, string $kind): string
    {
        if ($layout === 'topic') {
            return "u:{{$topic}}:{$kind}";
        }
        return ['pool' => 'delayer:job_pool', 'reserved' => 'delayer:reserved', 'ready' => "delayer:ready_queue:{$topic}",
            'dead' => "delayer:dead:{$topic}"][$kind];
    }

    private static function bucket(string $layout, string $topic, string $id): string
    {
        return $layout === 'topic' ? self::key($layout, $topic, 'job:') . $id : "delayer:job_bucket:{$id}";
    }

    /** A job due now, in its topic's ready queue, written byte for byte. */
    private function ready(string $layout, string $topic, string $id, string $body = self::BODY): void
    {
        $this->redis->hSet(self::bucket($layout, $topic, $id), 'topic', $topic);
        $this->redis->hSet(self::bucket($layout, $topic, $id), 'body', $body);
        $this->redis->lPush(self::key($layout, $topic, 'ready'), $id);
    }

    /** The server's part for one waiting job: pool to ready queue. */
    private function move(string $layout, string $topic, string $id): void
    {
        self::assertSame(1, $this->redis->zRem(self::key($layout, $topic, 'pool'), $id));
        $this->redis->lPush(self::key($layout, $topic, 'ready'), $id);
    }

    private function gone(string $layout, string $topic, string $id): void
    {
        self::assertSame(0, $this->redis->exists(self::bucket($layout, $topic, $id)));
        self::assertSame([], $this->redis->lRange(self::key($layout, $topic, 'ready'), 0, -1));
        self::assertFalse($this->redis->zScore(self::key($layout, $topic, 'reserved'), $id));
        self::assertFalse($this->redis->zScore(self::key($layout, $topic, 'pool'), $id));
        self::assertSame([], $this->redis->lRange(self::key($layout, $topic, 'dead'), 0, -1));
    }

    /** @dataProvider layouts */
    public function testPopHandsOutTheJobAndTheNextOne(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $this->ready($layout, self::TOPIC, self::ID);
        $this->ready($layout, self::TOPIC, self::ID . '2');
        $this->ready($layout, self::TOPIC, 'good', 'fine');
        $popped = $client->pop(self::TOPIC);
        self::assertInstanceOf(Message::class, $popped);
        self::assertSame([self::ID, self::TOPIC, self::BODY], [$popped->getId(), $popped->getTopic(), $popped->getBody()]);
        $blocking = $client->bPop(self::TOPIC, 2);
        self::assertInstanceOf(Message::class, $blocking);
        self::assertSame(self::ID . '2', $blocking->getId());
        self::assertSame('good', $client->pop(self::TOPIC)->getId());
        self::assertSame(0, $this->redis->exists(self::bucket($layout, self::TOPIC, self::ID)));
    }

    /** @dataProvider layouts */
    public function testAReservedJobLivesItsWholeLife(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $this->ready($layout, self::TOPIC, self::ID);
        $this->redis->sAdd($layout === 'topic' ? 'u:topics' : 'delayer:topics', self::TOPIC);
        $stats = array_values(array_filter($client->stats()->topics, static fn ($t): bool => $t->topic === self::TOPIC));
        self::assertCount(1, $stats);
        self::assertSame(1, $stats[0]->ready);
        self::assertSame([self::ID], array_map(static fn ($i) => \is_string($i) ? $i : $i->id, $client->listReady(self::TOPIC)->items));
        $job = $client->reserve(self::TOPIC, 30);
        self::assertInstanceOf(ReservedMessage::class, $job);
        self::assertSame([self::ID, self::TOPIC, self::BODY], [$job->id, $job->topic, $job->body]);
        self::assertNotFalse($client->touch($job, 60));
        self::assertSame('reserved', $client->job(self::TOPIC, self::ID)->state);
        self::assertSame([self::ID], array_map(static fn ($l) => $l->id, $client->listReserved(self::TOPIC)->items));
        self::assertTrue($client->release($job, 0, null, 'boom'));
        $this->move($layout, self::TOPIC, self::ID);
        $again = $client->bReserve(self::TOPIC, 30, 2);
        self::assertInstanceOf(ReservedMessage::class, $again);
        self::assertTrue($client->bury($again, null, 'for good'));
        $dead = $client->deadLetters(self::TOPIC);
        self::assertSame([self::ID], array_map(static fn ($d) => $d->id, $dead));
        self::assertSame(1, $client->requeueDead(self::TOPIC, [self::ID]));
        $this->move($layout, self::TOPIC, self::ID);
        [$acked, $jobs] = $client->reserveMany(self::TOPIC, 30, 5);
        self::assertSame([self::ID], array_map(static fn ($j) => $j->id, $jobs));
        self::assertTrue($client->bury($jobs[0]));
        self::assertSame(1, $client->purgeDead(self::TOPIC, [self::ID]));
        $this->gone($layout, self::TOPIC, self::ID);
    }

    /** @dataProvider layouts */
    public function testAWaitingJobIsListedLookedUpAndRemoved(string $layout): void
    {
        $client = $this->layoutClient($layout);
        $this->redis->hSet(self::bucket($layout, 't', self::ID), 'topic', 't');
        $this->redis->hSet(self::bucket($layout, 't', self::ID), 'body', self::BODY);
        $this->redis->zAdd(self::key($layout, 't', 'pool'), time() + 600, self::ID);
        self::assertSame([self::ID], array_map(static fn ($l) => $l->id, $client->listScheduled('t')->items));
        self::assertSame('scheduled', $client->job('t', self::ID)->state);
        self::assertTrue($layout === 'topic' ? $client->remove(self::ID, 't') : $client->remove(self::ID));
        $this->gone($layout, 't', self::ID);
    }

    /** @dataProvider layouts */
    public function testTheWorkerRunsAndAcksThem(string $layout): void
    {
        $client = $this->layoutClient($layout);
        foreach ([self::ID, self::ID . "\x81"] as $id) {
            $this->ready($layout, self::TOPIC, $id);
        }
        $worker = new Worker($client, ttr: 30, signals: false, logger: static fn () => null);
        $seen = [];
        $worker->handle(self::TOPIC, static function (Job $job) use ($worker, &$seen): void {
            $seen[] = $job->id;
            if (\count($seen) === 2) {
                $worker->stop();
            }
        });
        $worker->run();
        sort($seen);
        self::assertSame([self::ID, self::ID . "\x81"], $seen);
        $this->gone($layout, self::TOPIC, self::ID);
        $this->gone($layout, self::TOPIC, self::ID . "\x81");
    }
}
