<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;

/**
 * What a {@see Client} needs of its way to Redis, whichever the deployment:
 * one node or the master the sentinels name ({@see Connection}), or a Redis
 * Cluster ({@see ClusterConnection}).
 *
 * Apart so that the client's calls ({@see Calls}) are written once and the
 * deployments differ only in how a command reaches its node. The rules are
 * the same for both: a lost socket raises ConnectionException and the next
 * call connects again, an error reply raises RedisErrorException, nothing
 * is retried (whether a lost call ran is unknown).
 *
 * @internal used by {@see Client} and {@see Options}
 */
interface RedisLink
{
    /**
     * Connects now unless connected.
     *
     * @throws ConnectionException
     */
    public function open(): void;

    /**
     * The live phpredis instance (a RedisCluster in cluster mode), for 1.x
     * subclasses' `$_driver`.
     *
     * @throws ConnectionException
     */
    public function driver(): \Redis|\RedisCluster;

    /**
     * Runs one script by EVALSHA (loading it on NOSCRIPT).
     *
     * @param value-of<Scripts::NAMES> $name
     * @param list<string> $keys
     * @param list<string> $argv
     * @throws ConnectionException|RedisErrorException
     */
    public function script(string $name, array $keys, array $argv): mixed;

    /**
     * Runs one script once per call, in as few round trips as the
     * deployment allows ({@see Connection::pipelined()}).
     *
     * @param Scripts::PUSH|Scripts::PUSH_MANY $name
     * @param list<array{0: list<string>, 1: list<string>}> $calls
     * @return list<mixed>
     * @throws ConnectionException|RedisErrorException
     */
    public function pipelined(string $name, array $calls): array;

    /**
     * Plain commands whose first argument is their key, replies in order
     * (the per-topic layout's numbers).
     *
     * @param list<array{0: string, 1: list<string>}> $commands
     * @return list<mixed>
     * @throws ConnectionException|RedisErrorException
     */
    public function commands(array $commands): array;

    /**
     * A blocking command (BRPOP, BLMOVE) whose last argument is the timeout.
     *
     * @param list<string> $args the arguments before the timeout; the first is the key
     * @param float $wait seconds; 0 waits forever
     * @return mixed the reply, or null on timeout
     * @throws ConnectionException|RedisErrorException
     */
    public function blocking(string $command, array $args, float $wait): mixed;

    /**
     * WAIT 1: how many replicas have the writes just made (the least over
     * the nodes written to).
     *
     * @param list<string> $keys keys written (a cluster asks each of their nodes)
     * @throws ConnectionException|RedisErrorException
     */
    public function waitForReplica(float $timeout, array $keys = []): int;

    /** A link with the same settings, not yet open. */
    public function copy(): self;

    /** Closes the link; a later call opens it again. */
    public function close(): void;
}
