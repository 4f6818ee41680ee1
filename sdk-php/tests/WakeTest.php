<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Message;

/**
 * push, pushMany, reschedule and release pass the wake channel
 * (`<prefix>wake`), so the scripts publish a due time earlier than the
 * pool's head and a sleeping server wakes for it (issue 10, item 9). Read by
 * a plain RESP subscriber on its own socket.
 */
final class WakeTest extends RedisTestCase
{
    /** @var resource|null */
    private $subscriber = null;

    protected function tearDown(): void
    {
        if ($this->subscriber !== null) {
            fclose($this->subscriber);
            $this->subscriber = null;
        }
        parent::tearDown();
    }

    public function testEachWriteThatMovesThePoolsHeadEarlierAnnouncesItsDueTimeAndTopic(): void
    {
        $this->subscribe('delayer:wake');
        $client = $this->client();

        $client->schedule(Message::create('a', 't'), 100); // empty pool: published
        self::assertSame($this->due('a') . ' t', $this->nextMessage());
        $client->schedule(Message::create('later', 't'), 200); // after the head: nothing
        $client->pushMany([[Message::create('b', 't'), 80], [Message::create('c', 't'), 50]]); // one message, the earliest
        self::assertSame($this->due('c') . ' t', $this->nextMessage(), 'nothing for "later"; c, the earliest of the batch');
        $client->reschedule('later', 10);
        self::assertSame($this->due('later') . ' t', $this->nextMessage());

        $this->redis->del('delayer:job_pool');
        $this->redis->lPush('delayer:ready_queue:t', 'a');
        $job = $client->reserve('t', 60);
        self::assertSame('a', $job->id);
        self::assertTrue($client->release($job, 5));
        self::assertSame($this->due('a') . ' t', $this->nextMessage());
    }

    public function testTheChannelFollowsThePrefix(): void
    {
        $this->subscribe('shop:wake');
        $this->client(['prefix' => 'shop:'])->schedule(Message::create('x', 't'), 1);
        self::assertSame(
            number_format((float) $this->redis->zScore('shop:job_pool', 'x'), 3, '.', '') . ' t',
            $this->nextMessage()
        );
    }

    private function due(string $id): string
    {
        $score = $this->redis->zScore('delayer:job_pool', $id);
        self::assertNotFalse($score, "{$id} waits in the pool");
        return number_format((float) $score, 3, '.', '');
    }

    private function subscribe(string $channel): void
    {
        $socket = @stream_socket_client('tcp://127.0.0.1:' . RedisServer::shared()->port, $errno, $error, 5.0);
        self::assertNotFalse($socket, "cannot reach Redis: {$error}");
        stream_set_timeout($socket, 10);
        $this->subscriber = $socket;
        fwrite($socket, sprintf("*2\r\n\$9\r\nSUBSCRIBE\r\n\$%d\r\n%s\r\n", \strlen($channel), $channel));
        self::assertSame(['subscribe', $channel, 1], $this->readReply());
    }

    /** The payload of the next message on the subscribed channel (fails after 10 s). */
    private function nextMessage(): string
    {
        $reply = $this->readReply();
        self::assertSame('message', $reply[0] ?? null);
        return (string) $reply[2];
    }

    /** One RESP reply (arrays, bulk strings, integers: what SUBSCRIBE sends). */
    private function readReply(): mixed
    {
        $line = fgets($this->subscriber);
        self::assertNotFalse($line, 'no message within 10 s');
        $line = rtrim($line, "\r\n");
        return match ($line[0]) {
            '*' => array_map(fn (): mixed => $this->readReply(), range(1, (int) substr($line, 1)) ?: []),
            '$' => substr((string) stream_get_contents($this->subscriber, (int) substr($line, 1) + 2), 0, -2),
            ':' => (int) substr($line, 1),
            default => self::fail("unexpected RESP line {$line}"),
        };
    }
}
