<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Eviction;
use Delayer\Job;
use Delayer\Worker;
use Delayer\WorkerHooks;
use PHPUnit\Framework\TestCase;

/**
 * The Worker warns when Redis may evict job data (issue 20, item 3), against
 * a real redis-server started with --maxmemory-policy allkeys-lru: the
 * warning names the policy and the fix, once (not per job); read with
 * CONFIG GET, or INFO where the ACL user may not run CONFIG; said again
 * after an outage. Under noeviction nothing is said.
 */
final class WorkerEvictionTest extends TestCase
{
    private const WARNING = 'warning: redis maxmemory-policy is allkeys-lru: Redis may evict job data and lose jobs;'
        . ' set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)';
    private const USER = 'worker';
    private const PASSWORD = 'worker-pw-Secret-7';

    private static ?RedisServer $lru = null;

    public static function setUpBeforeClass(): void
    {
        self::$lru = RedisServer::start(null, 10.0, [
            '--maxmemory-policy', 'allkeys-lru',
            '--user', self::USER, 'on', '>' . self::PASSWORD, '~*', '&*', '+@all', '-config',
            '--user', 'noinfo', 'on', '>' . self::PASSWORD, '~*', '&*', '+@all', '-config', '-info',
        ]);
    }

    public static function tearDownAfterClass(): void
    {
        self::$lru?->stop();
        self::$lru = null;
    }

    /**
     * Runs a Worker over $jobs ready jobs of topic "t"; returns its log lines.
     *
     * @param array<string, mixed> $options the client's
     * @return list<string>
     */
    private static function work(RedisServer $server, array $options, int $jobs = 5): array
    {
        $redis = $server->connect();
        $redis->flushAll();
        for ($i = 0; $i < $jobs; $i++) {
            $redis->hSet("delayer:job_bucket:j{$i}", 'topic', 't');
            $redis->hSet("delayer:job_bucket:j{$i}", 'body', 'b');
            $redis->lPush('delayer:ready_queue:t', "j{$i}");
        }
        $redis->close();
        $client = new Client($options + ['host' => '127.0.0.1', 'port' => $server->port, 'timeout' => 2]);
        $lines = [];
        $worker = new Worker($client, ttr: 30, signals: false, logger: static function (string $level, string $message) use (&$lines): void {
            $lines[] = "{$level}: {$message}";
        });
        $done = 0;
        $worker->handle('t', static function (Job $job) use ($worker, $jobs, &$done): void {
            if (++$done === $jobs) {
                $worker->stop();
            }
        });
        $worker->run();
        self::assertSame($jobs, $done);
        return array_values(array_filter($lines, static fn (string $l): bool => str_contains($l, 'maxmemory-policy')));
    }

    public function testAnEvictingPolicyIsNamedOnceWithItsFix(): void
    {
        self::assertSame([self::WARNING], self::work(self::$lru, []));
    }

    public function testAUserWithoutConfigIsToldByInfo(): void
    {
        self::assertSame([self::WARNING], self::work(self::$lru, ['username' => self::USER, 'password' => self::PASSWORD]));
    }

    public function testAPolicyNobodyMayReadIsSaidSo(): void
    {
        self::assertSame(['warning: ' . Eviction::UNREADABLE], self::work(self::$lru, ['username' => 'noinfo', 'password' => self::PASSWORD]));
    }

    public function testNoevictionSaysNothing(): void
    {
        self::assertSame([], self::work(RedisServer::shared(), []));
    }

    public function testAReadingIsSaidFirstAfterAnOutageAndWhenItChanged(): void
    {
        $lines = [];
        $hooks = new WorkerHooks(static function (string $level, string $message) use (&$lines): void {
            $lines[] = $message;
        });
        $watch = new Eviction();
        $watch->report('allkeys-lru', $hooks);
        $watch->report('allkeys-lru', $hooks); // a connection replaced without an outage
        $watch->outage();
        $watch->report('allkeys-lru', $hooks);
        $watch->report('volatile-lru', $hooks);
        $watch->report('noeviction', $hooks);
        self::assertSame([
            sprintf(Eviction::WARNING, 'allkeys-lru'),
            sprintf(Eviction::WARNING, 'allkeys-lru'),
            sprintf(Eviction::WARNING, 'volatile-lru'),
        ], $lines);
    }
}
