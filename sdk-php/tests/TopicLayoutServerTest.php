<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\Client;
use Delayer\Message;
use Delayer\ReservedMessage;
use PHPUnit\Framework\TestCase;

/**
 * The per-topic layout end to end: this SDK pushes, the real delayer server
 * (env DELAYER_BIN, or target/debug/delayer) started with `[delayer] layout
 * = topic` moves, and bPop hands each job out after its due time (Redis's
 * clock), never before. The server finds the topics through the index this
 * SDK writes (`<prefix>due`) and its wake messages.
 */
final class TopicLayoutServerTest extends TestCase
{
    private const PREFIX = 'e2e:';

    private ?RedisServer $redis = null;

    /** @var resource|null */
    private $server = null;

    private string $dir = '';

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-topic-e2e-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        if ($this->server !== null) {
            proc_terminate($this->server, SIGTERM);
            $until = microtime(true) + 10;
            while (proc_get_status($this->server)['running'] && microtime(true) < $until) {
                usleep(20000);
            }
            if (proc_get_status($this->server)['running']) {
                proc_terminate($this->server, SIGKILL);
            }
            proc_close($this->server);
            $this->server = null;
        }
        $this->redis?->stop();
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    public function testTheServerMovesWhatThisSdkPushesAndBpopGetsItAfterItsDueTimeOnly(): void
    {
        $this->redis = RedisServer::start();
        $conf = $this->startDelayerServer();
        $client = Client::fromConfig($conf, ['timeout' => 5]);
        self::assertSame('topic', $client->getKeys()->layout());
        $raw = $this->redis->connect();

        // several short delays on two topics, and one of them again under the same id on the other topic
        $jobs = [['mail', 'a', 1.2], ['mail', 'b', 0.3], ['sms', 'a', 0.8]];
        foreach ($jobs as [$topic, $id, $delay]) {
            $client->pushTo($topic, $id, $delay, "{$topic}/{$id}");
        }
        $due = [];
        foreach ($jobs as [$topic, $id]) {
            $score = $raw->zScore(self::PREFIX . '{' . $topic . '}:pool', $id);
            // the server may already have moved a short one: the bucket's due is then in the past anyway
            $due["{$topic}/{$id}"] = $score === false ? null : (float) $score;
        }

        $got = [];
        $until = microtime(true) + 60;
        while (\count($got) < 3) {
            self::assertLessThan($until, microtime(true), 'the server moved ' . json_encode($got) . " within 60 s:\n" . $this->log());
            foreach (['mail', 'sms'] as $topic) {
                $message = $client->bPop($topic, 0.2);
                if ($message === false) {
                    continue;
                }
                [$s, $us] = $raw->time();
                $now = (int) $s + (int) $us / 1e6;
                $name = "{$message->topic}/{$message->id}";
                self::assertSame($name, $message->body);
                self::assertArrayHasKey($name, $due);
                if ($due[$name] !== null) {
                    self::assertGreaterThanOrEqual($due[$name], $now, "{$name} was handed out before its due time");
                }
                $got[] = $name;
            }
        }
        sort($got);
        self::assertSame(['mail/a', 'mail/b', 'sms/a'], $got);
        self::assertSame([], $raw->keys(self::PREFIX . '{*}:job:*'), 'every job taken, none left behind');
        $raw->close();
    }

    /**
     * At least once through the server: a reservation left to expire comes
     * back (the server finds its deadline in the index reserve wrote), a
     * release and a dead-letter requeue are moved again, an ack ends it.
     */
    public function testReservationsExpireAndRetriesAreMovedByTheServer(): void
    {
        $this->redis = RedisServer::start();
        $client = Client::fromConfig($this->startDelayerServer(), ['timeout' => 5]);
        $raw = $this->redis->connect();
        $client->schedule(Message::create('j', 'mail', 'body')->withBackoff(Backoff::fixed(0.1))->withMaxAttempts(5), 0.2);

        $first = $this->reserveWithin($client, 'mail', 0.5);
        self::assertSame(['j', 1], [$first->id, $first->attempts]);
        // not acked: the server expires it after its ttr and it is delivered again
        $second = $this->reserveWithin($client, 'mail', 60);
        self::assertSame(['j', 2], [$second->id, $second->attempts]);
        [$s, $us] = $raw->time();
        self::assertGreaterThanOrEqual($first->deadline, (int) $s + (int) $us / 1e6, 'not before the ttr ran out');
        self::assertFalse($client->ack($first), 'the expired reservation is no longer held');

        self::assertTrue($client->release('j', 0.3, $second->receipt, 'try later', 'mail'));
        $third = $this->reserveWithin($client, 'mail', 60);
        self::assertSame(['j', 3], [$third->id, $third->attempts]);
        self::assertTrue($client->bury($third));
        self::assertSame(1, $client->requeueDead('mail'));
        $fourth = $this->reserveWithin($client, 'mail', 60);
        self::assertSame(['j', 1], [$fourth->id, $fourth->attempts], 'a requeue resets the attempts');
        self::assertTrue($client->ack($fourth));
        self::assertSame([], $raw->keys(self::PREFIX . '{mail}:job:*'));
        self::assertSame(0, $raw->zCard(self::PREFIX . '{mail}:reserved'));
        $raw->close();
    }

    /** bReserve() with $ttr until a job comes, or fails after 30 s. */
    private function reserveWithin(Client $client, string $topic, float $ttr): ReservedMessage
    {
        $until = microtime(true) + 30;
        while (microtime(true) < $until) {
            $job = $client->bReserve($topic, $ttr, 0.2);
            if ($job !== false) {
                return $job;
            }
        }
        self::fail("nothing to reserve on {$topic} within 30 s:\n" . $this->log());
    }

    /** The delayer binary on the test's Redis with layout = topic; up once it has moved a probe job. */
    private function startDelayerServer(): string
    {
        $root = \dirname(__DIR__, 2);
        $binary = getenv('DELAYER_BIN') ?: "{$root}/target/debug/delayer";
        if (!is_file($binary)) {
            exec('cargo build -q -p delayer-server --manifest-path ' . escapeshellarg("{$root}/Cargo.toml") . ' 2>&1', $out, $code);
            self::assertSame(0, $code, "cargo build -p delayer-server failed:\n" . implode("\n", $out));
        }
        $conf = "{$this->dir}/delayer.conf";
        file_put_contents($conf, "[delayer]\ntimer_interval = 1000\nkey_prefix = " . self::PREFIX . "\nlayout = topic\nlog_level = info\n\n"
            . "[redis]\nhost = 127.0.0.1\nport = {$this->redis->port}\n");
        $this->server = proc_open(
            [$binary, '-c', $conf],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/server.log", 'w'], 2 => ['file', "{$this->dir}/server.log", 'a']],
            $pipes,
            $this->dir
        );
        self::assertIsResource($this->server);
        $probe = Client::fromConfig($conf);
        $probe->schedule(Message::create('probe', 'probe', ''), 0);
        $until = microtime(true) + 60;
        while ($probe->pop('probe') === false) {
            self::assertTrue(proc_get_status($this->server)['running'], "the delayer server exited:\n" . $this->log());
            self::assertLessThan($until, microtime(true), "the delayer server moved nothing within 60 s:\n" . $this->log());
            usleep(20000);
        }
        $probe->close();
        return $conf;
    }

    private function log(): string
    {
        return (string) @file_get_contents("{$this->dir}/server.log");
    }
}
