<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\DelayerException;
use Delayer\Message;
use Delayer\ReservedMessage;
use PHPUnit\Framework\TestCase;

/**
 * A client outlives a Redis restart (issue 10, item 4): a call made while
 * Redis is gone raises ConnectionException, and once Redis answers again
 * the next call works, blocking or not, whatever the call that failed. Each
 * test restarts its own redis-server on the same port.
 */
final class ReconnectTest extends TestCase
{
    private RedisServer $server;

    /** @var list<resource> helper processes, ended in tearDown */
    private array $helpers = [];

    protected function setUp(): void
    {
        $this->server = RedisServer::start();
    }

    protected function tearDown(): void
    {
        foreach ($this->helpers as $helper) {
            proc_terminate($helper);
            proc_close($helper);
        }
        $this->server->stop();
    }

    /**
     * Every call, each on a client whose first failure it is, then each
     * again once Redis is back.
     *
     * @return array<string, \Closure(Client): mixed> what each returns once the job it needs is ready
     */
    private static function calls(): array
    {
        return [
            'push' => static fn (Client $c) => $c->schedule(Message::create('p', 'other'), 60),
            'push ifAbsent' => static fn (Client $c) => $c->schedule(Message::create('q', 'other'), 60, ifAbsent: true),
            'pushMany' => static fn (Client $c) => $c->pushMany([[Message::create('m', 'other'), 60]]),
            'pop' => static fn (Client $c) => $c->pop('t:pop')->id,
            'bPop' => static fn (Client $c) => $c->bPop('t:bPop', 5)->id,
            'bPop forever' => static fn (Client $c) => $c->bPop('t:bPopForever', 0)->id,
            'reserve' => static fn (Client $c) => $c->reserve('t:reserve', 30)->id,
            'bReserve' => static fn (Client $c) => $c->bReserve('t:bReserve', 30, 5)->id,
            'ack' => static fn (Client $c) => $c->ack('nothing'),
            'touch' => static fn (Client $c) => $c->touch('nothing', 5),
            'release' => static fn (Client $c) => $c->release('nothing'),
            'bury' => static fn (Client $c) => $c->bury('nothing'),
            'reschedule' => static fn (Client $c) => $c->reschedule('nothing', 5),
            'remove' => static fn (Client $c) => $c->remove('nothing'),
            'deadLetters' => static fn (Client $c) => $c->deadLetters('t'),
            'requeueDead' => static fn (Client $c) => $c->requeueDead('t'),
            'purgeDead' => static fn (Client $c) => $c->purgeDead('t', ['x']),
        ];
    }

    public function testEveryCallWorksAgainOnceRedisIsBack(): void
    {
        $clients = [];
        foreach (array_keys(self::calls()) as $name) {
            $clients[$name] = $this->client();
        }
        $this->server->kill();
        foreach (self::calls() as $name => $call) {
            try {
                $call($clients[$name]);
                self::fail("{$name}: expected ConnectionException while Redis is down");
            } catch (ConnectionException $e) {
                self::assertInstanceOf(DelayerException::class, $e);
            }
        }
        $this->server->restart();
        $this->readyJobs();
        foreach (self::calls() as $name => $call) {
            $expected = match ($name) {
                'push', 'push ifAbsent' => true,
                'pushMany' => 1,
                'pop', 'bPop', 'bPop forever', 'reserve', 'bReserve' => 'job:t:' . self::topic($name),
                'deadLetters' => [],
                'requeueDead', 'purgeDead' => 0,
                default => false,
            };
            self::assertSame($expected, $call($clients[$name]), "{$name} once Redis is back");
        }
    }

    public function testAClientIdleDuringTheRestartWorksAtOnce(): void
    {
        $clients = [];
        foreach (array_keys(self::calls()) as $name) {
            $clients[$name] = $this->client();
        }
        $idleSince = microtime(true);
        $this->server->restart();
        $this->readyJobs();
        while (microtime(true) - $idleSince < 0.5) {
            usleep(10000); // idle for a while, as a client between two requests
        }
        foreach (self::calls() as $name => $call) {
            self::assertNotNull($call($clients[$name]), "{$name} on a client idle during the restart");
        }
    }

    /** The bug of issue 10: a bPop / bReserve blocked when Redis went away kept failing after it was back. */
    public function testABlockedCallThatLostRedisWorksOnceRedisIsBack(): void
    {
        $blocking = [
            'bPop' => static fn (Client $c) => $c->bPop('t:bPop', 30),
            'bReserve' => static fn (Client $c) => $c->bReserve('t:bReserve', 30, 30),
            'bPop forever' => static fn (Client $c) => $c->bPop('t:bPopForever', 0),
        ];
        foreach ($blocking as $name => $call) {
            $client = $this->client();
            $this->stopRedisIn(0.5);
            $start = microtime(true);
            try {
                $call($client);
                self::fail("{$name}: expected ConnectionException when Redis goes away");
            } catch (ConnectionException $e) {
                self::assertLessThan(20, microtime(true) - $start, "{$name} noticed Redis leave");
            }
            $this->waitUntilDown();
            try {
                $call($client); // a worker loop tries again while Redis is down
                self::fail("{$name}: expected ConnectionException while Redis is down");
            } catch (ConnectionException) {
                $this->addToAssertionCount(1);
            }
            $this->server->restart();
            $this->readyJobs('t:' . self::topic($name));
            $job = $call($client);
            self::assertInstanceOf($name === 'bReserve' ? ReservedMessage::class : Message::class, $job, $name);
            self::assertSame('job:t:' . self::topic($name), $job->id);
            // and the connection stays good
            self::assertFalse($client->pop('t:none'));
        }
    }

    /** The topic a consuming call takes from: "bPop forever" takes from t:bPopForever. */
    private static function topic(string $name): string
    {
        return str_replace(' f', 'F', $name);
    }

    private function client(): Client
    {
        return new Client(['host' => '127.0.0.1', 'port' => $this->server->port, 'timeout' => 2]);
    }

    /** A ready job "job:<topic>" for each consuming call's topic (or those given), written raw. */
    private function readyJobs(string ...$topics): void
    {
        $redis = $this->server->connect();
        foreach ($topics ?: ['t:pop', 't:bPop', 't:bPopForever', 't:reserve', 't:bReserve'] as $topic) {
            $redis->hMSet("delayer:job_bucket:job:{$topic}", ['topic' => $topic, 'body' => 'b']);
            $redis->lPush("delayer:ready_queue:{$topic}", "job:{$topic}");
        }
        $redis->close();
    }

    /** Stops redis-server (SIGTERM) from another process after $seconds, while this one is blocked. */
    private function stopRedisIn(float $seconds): void
    {
        $pid = $this->server->pid();
        $helper = proc_open(['sh', '-c', sprintf('sleep %.1F; kill -TERM %d', $seconds, $pid)], [], $pipes);
        self::assertIsResource($helper);
        $this->helpers[] = $helper;
    }

    private function waitUntilDown(): void
    {
        $until = microtime(true) + 20;
        while ($this->server->running()) {
            self::assertLessThan($until, microtime(true), 'redis-server did not stop');
            usleep(20000);
        }
    }
}
