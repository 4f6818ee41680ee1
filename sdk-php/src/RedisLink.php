<?php

declare(strict_types=1);

namespace Delayer;

/**
 * What a {@see Client} needs of its way to Redis, so that its calls are
 * written once and the deployments differ only in how a command reaches
 * its node: one node or the sentinels' master ({@see Connection}), or a
 * Redis Cluster ({@see ClusterConnection}). Either way a lost socket raises
 * ConnectionException and the next call connects again, an error reply
 * raises RedisErrorException, and nothing is retried.
 *
 * @internal used by {@see Client} and {@see Options}
 */
interface RedisLink
{
    /** Connects now unless connected. */
    public function open(): void;

    /** The live phpredis instance (a RedisCluster on a cluster), for 1.x subclasses' `$_driver`. */
    public function driver(): \Redis|\RedisCluster;

    /**
     * One script call by EVALSHA (loaded on NOSCRIPT).
     *
     * @param value-of<Scripts::NAMES> $name
     * @param list<string> $keys
     * @param list<string> $argv
     */
    public function script(string $name, array $keys, array $argv): mixed;

    /**
     * One script, once per call, in as few round trips as the deployment allows.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $calls
     * @return list<mixed>
     */
    public function pipelined(string $name, array $calls): array;

    /**
     * Plain commands whose first argument is their key, replies in order.
     *
     * @param list<array{0: string, 1: list<string>}> $commands
     * @return list<mixed>
     */
    public function commands(array $commands): array;

    /**
     * A blocking command (BRPOP, BLMOVE) whose last argument is the timeout.
     *
     * @param list<string> $args the arguments before the timeout; the first is the key
     * @param float $wait seconds; 0 waits forever
     * @return mixed the reply, or null on timeout
     */
    public function blocking(string $command, array $args, float $wait): mixed;

    /**
     * WAIT 1: how many replicas have the writes just made (the least over the nodes of $keys).
     *
     * @param list<string> $keys
     */
    public function waitForReplica(float $timeout, array $keys = []): int;

    /** A link with the same settings, not yet open. */
    public function copy(): self;

    /** Closes the link; a later call opens it again. */
    public function close(): void;
}
