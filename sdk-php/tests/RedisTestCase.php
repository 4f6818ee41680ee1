<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\DelayerException;
use Delayer\Exception\InvalidArgumentException;
use PHPUnit\Framework\TestCase;

/**
 * Base of the tests that talk to the shared redis-server: the database is
 * flushed before each test, $this->redis is a raw phpredis connection for
 * looking at what the client wrote, and moveDue() plays the server by running
 * the repository's real lua/move.lua.
 */
abstract class RedisTestCase extends TestCase
{
    protected \Redis $redis;

    protected function setUp(): void
    {
        $this->redis = RedisServer::shared()->connect();
        $this->redis->flushAll();
        $this->redis->script('flush');
    }

    protected function tearDown(): void
    {
        $this->redis->close();
    }

    /** @param array<string, mixed> $config */
    protected function client(array $config = []): Client
    {
        return new Client($config + ['host' => '127.0.0.1', 'port' => RedisServer::shared()->port, 'timeout' => 2]);
    }

    /** The repository's lua/ directory (the single source of the scripts). */
    protected static function repoLuaDir(): string
    {
        return \dirname(__DIR__, 2) . '/lua';
    }

    /**
     * Runs the server's move.lua until $expected ids have been taken off the
     * pool (jobs with a future due time are waited for), or fails after
     * $deadline seconds.
     *
     * @return array<string, int> per topic, how many ids were moved
     */
    protected function moveDue(int $expected, string $prefix = 'delayer:', float $deadline = 5.0): array
    {
        $source = file_get_contents(self::repoLuaDir() . '/move.lua');
        $until = microtime(true) + $deadline;
        $taken = 0;
        $perTopic = [];
        while (true) {
            $k = new \Delayer\Keys($prefix);
            $result = $this->redis->eval($source, [
                $k->pool(), $k->malformed(), $k->scheduledCount(), $k->topics(), $k->reserved(),
                $k->bucketPrefix(), $k->readyQueuePrefix(), '1000',
            ], 5);
            self::assertIsArray($result, 'move.lua failed: ' . $this->redis->getLastError());
            $taken += (int) $result[0];
            for ($i = 0; $i + 1 < \count($result[3]); $i += 2) {
                $perTopic[$result[3][$i]] = ($perTopic[$result[3][$i]] ?? 0) + (int) $result[3][$i + 1];
            }
            if ($taken >= $expected) {
                self::assertSame($expected, $taken, 'move.lua took more ids than expected');
                ksort($perTopic);
                return $perTopic;
            }
            if (microtime(true) > $until) {
                self::fail("move.lua took {$taken} of {$expected} ids within {$deadline} s");
            }
            usleep(5000);
        }
    }

    /**
     * Runs $call, which must raise the SDK's InvalidArgumentException without
     * sending a single command to Redis or changing anything.
     *
     * @param \Closure(Client): mixed $call
     */
    protected function assertRejectedBeforeRedis(\Closure $call, ?Client $client = null): void
    {
        $client ??= $this->client();
        $this->redis->set('sentinel', '1');
        $size = $this->redis->dbSize();
        // INFO counts itself: two INFOs in a row differ by exactly one
        $a = $this->commandsProcessed();
        $b = $this->commandsProcessed();
        $perCall = $b - $a;
        try {
            $call($client);
            self::fail('expected InvalidArgumentException');
        } catch (InvalidArgumentException $e) {
            self::assertInstanceOf(DelayerException::class, $e);
            self::assertInstanceOf(\InvalidArgumentException::class, $e);
        }
        self::assertSame($perCall, $this->commandsProcessed() - $b, 'no command may reach Redis');
        self::assertSame($size, $this->redis->dbSize());
    }

    /** Redis's clock, in seconds with microseconds. */
    protected function redisTime(): float
    {
        [$s, $us] = $this->redis->time();
        return (int) $s + (int) $us / 1e6;
    }

    /** Redis's count of processed commands (one INFO call included). */
    protected function commandsProcessed(): int
    {
        $info = $this->redis->info('stats');
        return (int) $info['total_commands_processed'];
    }
}
