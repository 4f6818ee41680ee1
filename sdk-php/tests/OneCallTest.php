<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Message;
use Delayer\Scripts;

/**
 * Every operation is one script call (issue 21), in both layouts: what the
 * client's connection sends, read with MONITOR on a redis-server of its
 * own, is one EVALSHA per operation (after BRPOP / BLMOVE for a blocking
 * one; push_many.lua once per 100 jobs), never an index write, a wake-up,
 * a SCRIPT LOAD or a second call. The state each
 * operation needs is set up from another connection, whose commands (and
 * the markers between operations) are not the client's.
 */
final class OneCallTest extends RedisTestCase
{
    /** @return iterable<string, array{string}> */
    public static function layouts(): iterable
    {
        yield 'classic' => ['classic'];
        yield 'topic' => ['topic'];
    }

    /** @dataProvider layouts */
    #[\PHPUnit\Framework\Attributes\DataProvider('layouts')]
    public function testEveryOperationIsOneScriptCall(string $layout): void
    {
        $server = RedisServer::start();
        $monitor = null;
        try {
            $redis = $server->connect();
            foreach (Scripts::NAMES as $name) { // loaded: no NOSCRIPT round in what is seen
                $redis->script('load', Scripts::source($name));
            }
            $client = new Client(['host' => '127.0.0.1', 'port' => $server->port, 'layout' => $layout, 'prefix' => 'one:']);
            $keys = $client->getKeys();
            $ready = static fn (string $id): mixed => $redis->multi()
                ->zRem($keys->names('t')->pool, $id)->lPush((string) $keys->names('t')->ready, $id)->exec();
            $monitor = new Monitor($server->port, self::addressOf($redis));
            $ops = [
                'pushTo' => [fn () => $client->pushTo('t', 'a', 0, 'A'), ['EVALSHA']],
                'push (1.x)' => [fn () => $client->push(Message::create('b', 't', 'B'), 0), ['EVALSHA']],
                'schedule' => [fn () => $client->schedule(Message::create('c', 't', 'C')->withMaxAttempts(3), 0), ['EVALSHA']],
                'pushMany' => [fn () => $client->pushMany([[Message::create('d', 't'), 60], [Message::create('e', 't'), 0]]), ['EVALSHA']],
                'pushMany, two calls' => [fn () => $client->pushMany(array_map(
                    static fn (int $i): array => [Message::create("many{$i}", 't'), 600],
                    range(1, Scripts::PUSH_MANY_MAX_JOBS + 1)
                )), ['EVALSHA', 'EVALSHA']],
                'reschedule' => [fn () => self::assertIsFloat($client->reschedule('d', 1, 't')), ['EVALSHA']],
                'remove' => [fn () => self::assertTrue($client->remove('d', 't')), ['EVALSHA']],
                'pop' => [function () use ($ready, $client): void {
                    $ready('a');
                    self::assertSame('a', $client->pop('t')->getId());
                }, ['EVALSHA']],
                'bPop' => [function () use ($ready, $client): void {
                    $ready('b');
                    self::assertSame('b', $client->bPop('t', 2)->getId());
                }, ['EVALSHA']], // a wait starts with the non-blocking claim
                'bPop, a wait' => [fn () => self::assertFalse($client->bPop('t', 0.05)), ['EVALSHA', 'BRPOP']],
                'reserve, touch, release' => [function () use ($ready, $client): void {
                    $ready('c');
                    $job = $client->reserve('t', 30);
                    self::assertIsFloat($client->touch($job, 5));
                    self::assertTrue($client->release($job, 0));
                }, ['EVALSHA', 'EVALSHA', 'EVALSHA']],
                'bReserve, bury' => [function () use ($ready, $client): void {
                    $ready('c');
                    self::assertTrue($client->bury($client->bReserve('t', 30, 2)));
                }, ['EVALSHA', 'EVALSHA']],
                'bReserve, a wait' => [fn () => self::assertFalse($client->bReserve('t', 30, 0.05)), ['EVALSHA', 'BLMOVE']],
                'dead letters' => [function () use ($client): void {
                    self::assertCount(1, $client->deadLetters('t'));
                    self::assertSame(1, $client->requeueDead('t'));
                }, ['EVALSHA', 'EVALSHA']],
                'reserveMany, ack' => [function () use ($ready, $client): void {
                    $ready('c');
                    $ready('e');
                    [, $jobs] = $client->reserveMany('t', 30, 1);
                    [$acked, $more] = $client->reserveMany('t', 30, 1, [$jobs[0]]);
                    self::assertSame([true], $acked);
                    self::assertTrue($client->ack($more[0]));
                }, ['EVALSHA', 'EVALSHA', 'EVALSHA']],
                'inspection' => [function () use ($client): void {
                    $client->job('t', 'c');
                    $client->listScheduled('t');
                    $client->listReady('t');
                    $client->listReserved('t');
                }, ['EVALSHA', 'EVALSHA', 'EVALSHA', 'EVALSHA']],
            ];
            foreach ($ops as $name => [$op, $expected]) {
                $op();
                self::assertSame($expected, $monitor->commandsUntilMarker($redis, $name), "{$layout}: {$name}");
            }
        } finally {
            $monitor?->close();
            $server->stop();
        }
    }

    private static function addressOf(\Redis $redis): string
    {
        preg_match('/addr=(\S+)/', (string) $redis->rawCommand('CLIENT', 'INFO'), $m);
        return $m[1];
    }
}
