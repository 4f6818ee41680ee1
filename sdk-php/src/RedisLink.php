<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A {@see Client}'s way to Redis, so that its calls are written once: one
 * node or the sentinels' master ({@see Connection}), or a Redis Cluster
 * ({@see ClusterConnection}). Either way a lost socket raises ConnectionException
 * (the next call connects again), an error reply RedisErrorException; nothing is retried.
 *
 * @internal used by {@see Client} and {@see Options}
 */
interface RedisLink
{
    public function open(): void;

    /** The live phpredis instance (a RedisCluster on a cluster), for 1.x subclasses' `$_driver`. */
    public function driver(): \Redis|\RedisCluster;

    /**
     * @param value-of<Scripts::NAMES> $name
     * @param list<string> $keys
     * @param list<string> $argv
     */
    public function script(string $name, array $keys, array $argv): mixed;

    /**
     * One script, once per call, in as few round trips as the deployment allows.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $calls [keys, argv] each
     * @return list<mixed>
     */
    public function pipelined(string $name, array $calls): array;

    /**
     * @param list<array{0: string, 1: list<string>}> $commands each [command, args], args[0] its key
     * @return list<mixed>
     */
    public function commands(array $commands): array;

    /**
     * A blocking command (BRPOP, BLMOVE) whose last argument, $wait, is the timeout (seconds; 0: forever).
     *
     * @param list<string> $args the arguments before the timeout; the first is the key
     * @return mixed the reply, or null on timeout
     */
    public function blocking(string $command, array $args, float $wait): mixed;

    /** @param list<string> $keys WAIT 1: replicas holding the writes just made (the least over the nodes of $keys) */
    public function waitForReplica(float $timeout, array $keys = []): int;

    /** A link with the same settings, not yet open. */
    public function copy(): self;

    /** A later call opens it again. */
    public function close(): void;
}
