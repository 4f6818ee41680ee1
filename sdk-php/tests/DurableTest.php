<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Exception\NotReplicatedException;
use Delayer\Message;
use PHPUnit\Framework\TestCase;

/**
 * The durable option: after each push, on its connection, WAIT 1 waits for
 * a replica. With a replica in sync a push returns as usual; with none the
 * job is written all the same and NotReplicatedException says so. Real
 * redis-server processes: a primary and, for the replicated case, a replica.
 */
final class DurableTest extends TestCase
{
    public function testADurablePushReturnsOnceAReplicaHasIt(): void
    {
        // No diskless-sync delay: Redis 7 waits 5 s by default before the first sync.
        $primary = RedisServer::start(null, 10.0, ['--repl-diskless-sync-delay', '0']);
        $replica = RedisServer::start(null, 10.0, ['--replicaof', '127.0.0.1', (string) $primary->port]);
        try {
            $watch = $replica->connect();
            $until = microtime(true) + 30;
            while (($watch->info('replication')['master_link_status'] ?? '') !== 'up') {
                self::assertLessThan($until, microtime(true), 'the replica did not sync');
                usleep(50000);
            }
            // A generous wait: a replica in sync answers at once, but a loaded
            // machine has made it miss the default 1 s (`true`).
            $client = new Client(['host' => '127.0.0.1', 'port' => $primary->port, 'durable' => 10.0]);
            self::assertTrue($client->pushTo('t', 'a', 60));
            self::assertSame(2, $client->pushMany([[Message::create('b', 't'), 60], [Message::create('c', 't'), 60]]));
            self::assertSame(3, $primary->connect()->zCard('delayer:job_pool'));
        } finally {
            $replica->kill();
            $primary->kill();
        }
    }

    public function testWithoutAReplicaThePushIsWrittenAndSaysSo(): void
    {
        $server = RedisServer::shared();
        $raw = $server->connect();
        $raw->flushAll();
        $client = new Client(['host' => '127.0.0.1', 'port' => $server->port, 'durable' => 0.05]);
        try {
            $client->pushTo('t', 'alone', 60);
            self::fail('no NotReplicatedException');
        } catch (NotReplicatedException $e) {
            self::assertSame(1, $e->jobs);
            self::assertStringContainsString('no replica acknowledged', $e->getMessage());
        }
        self::assertNotFalse($raw->zScore('delayer:job_pool', 'alone'), 'written on the master all the same');
        try {
            $client->pushMany([[Message::create('m1', 't'), 60], [Message::create('m2', 't'), 60]]);
            self::fail('no NotReplicatedException');
        } catch (NotReplicatedException $e) {
            self::assertSame(2, $e->jobs);
        }
        try {
            $client->withOwnConnection()->pushTo('t', 'copy', 60);
            self::fail('the copy is not durable');
        } catch (NotReplicatedException $e) {
            self::assertSame(1, $e->jobs);
        }
        $plain = new Client(['host' => '127.0.0.1', 'port' => $server->port]);
        self::assertTrue($plain->pushTo('t', 'plain', 60));
        $this->expectException(ConfigException::class);
        new Client(['host' => '127.0.0.1', 'port' => $server->port, 'durable' => -1]);
    }
}
