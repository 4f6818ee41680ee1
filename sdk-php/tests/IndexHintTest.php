<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Message;
use Delayer\ScheduledMessage;

/**
 * The per-topic layout's index (`<prefix>due`, `<prefix>topics`) is the
 * server's: the SDK never writes it, so a broken index key fails no call
 * (issue 20, then issue 21). Here an index key holds a string (WRONGTYPE),
 * or Redis is full (OOM): pushTo, pushMany, reserve and touch answer their
 * script's result, the job is really there, and nothing is logged.
 */
final class IndexHintTest extends RedisTestCase
{
    private const TTR = 30;

    private string $log = '';
    private string|false $oldLog = false;

    protected function setUp(): void
    {
        parent::setUp();
        $this->log = (string) tempnam(sys_get_temp_dir(), 'delayer-log-');
        $this->oldLog = ini_set('error_log', $this->log);
    }

    protected function tearDown(): void
    {
        ini_set('error_log', (string) $this->oldLog);
        @unlink($this->log);
        parent::tearDown();
    }

    /** @return iterable<string, array{string}> */
    public static function brokenKeys(): iterable
    {
        yield 'topics' => ['topics'];
        yield 'due' => ['due'];
    }

    /** The server's part for a waiting job: from the pool to its ready queue. */
    private static function makeReady(\Redis $redis, string $prefix, string $id): void
    {
        self::assertSame(1, $redis->zRem("{$prefix}{mail}:pool", $id), "{$id} not waiting");
        $redis->lPush("{$prefix}{mail}:ready", $id);
    }

    /** @dataProvider brokenKeys */
    #[\PHPUnit\Framework\Attributes\DataProvider('brokenKeys')]
    public function testAWrongTypedIndexKeyFailsNoCall(string $broken): void
    {
        $prefix = "php-{$broken}:";
        $this->redis->set("{$prefix}{$broken}", 'x');
        $client = $this->client(['layout' => 'topic', 'prefix' => $prefix]);
        self::assertTrue($client->pushTo('mail', '1', 0));
        self::assertSame(2, $client->pushMany([
            new ScheduledMessage(Message::create('2', 'mail'), 0),
            new ScheduledMessage(Message::create('3', 'mail'), 0),
        ], true));
        foreach (['1', '2', '3'] as $id) { // as a server started later reads them
            self::assertSame(1, $this->redis->exists("{$prefix}{mail}:job:{$id}"), "{$broken}: job {$id}");
            self::assertIsFloat($this->redis->zScore("{$prefix}{mail}:pool", $id));
        }
        self::makeReady($this->redis, $prefix, '1');
        $job = $client->reserve('mail', self::TTR);
        self::assertNotFalse($job);
        self::assertSame('1', $job->getId());
        self::assertIsFloat($client->touch($job, self::TTR));
        self::assertSame('', (string) file_get_contents($this->log), 'the SDK writes no index: nothing to warn about');
    }

    public function testAFullRedisHandsOutTheReservedJob(): void
    {
        $server = RedisServer::start(args: ['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']);
        try {
            $redis = $server->connect();
            $client = new Client([
                'host' => '127.0.0.1', 'port' => $server->port, 'timeout' => 2, 'layout' => 'topic', 'prefix' => 'full:',
            ]);
            self::assertTrue($client->pushTo('mail', '1', 0));
            self::makeReady($redis, 'full:', '1');
            $filler = str_repeat('f', 65536);
            for ($n = 0; ; $n++) {
                self::assertLessThan(10000, $n, 'Redis never filled up');
                try {
                    $redis->set("filler:{$n}", $filler);
                } catch (\RedisException $e) { // phpredis raises OOM
                    self::assertStringStartsWith('OOM', $e->getMessage());
                    break;
                }
            }
            $job = $client->reserve('mail', self::TTR);
            self::assertNotFalse($job);
            self::assertSame('1', $job->getId());
        } finally {
            $server->stop();
        }
    }
}
