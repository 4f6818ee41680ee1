<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The one place where this SDK builds Redis key names (docs/PROTOCOL.md, "Keys").
 *
 * | key                           | type | content                                   |
 * | ----------------------------- | ---- | ----------------------------------------- |
 * | <prefix>job_pool              | ZSET | member = job id, score = due time (Unix s) |
 * | <prefix>job_bucket:<id>       | HASH | topic, body; has a TTL                    |
 * | <prefix>ready_queue:<topic>   | LIST | due ids, first due at the right end       |
 * | <prefix>malformed             | LIST | ids whose bucket could not be routed      |
 *
 * The prefix is prepended as is ("shop:delayer:" gives "shop:delayer:job_pool").
 * Ids and topics are expected to be validated already ({@see Validator}).
 */
final class Keys
{
    /** The default key prefix, shared with the server's `key_prefix`. */
    public const DEFAULT_PREFIX = 'delayer:';

    public function __construct(private readonly string $prefix = self::DEFAULT_PREFIX)
    {
    }

    /** The key prefix, e.g. "delayer:". */
    public function prefix(): string
    {
        return $this->prefix;
    }

    /** `<prefix>job_pool`: the ZSET of waiting ids scored by due time. */
    public function pool(): string
    {
        return $this->prefix . 'job_pool';
    }

    /** `<prefix>job_bucket:`: what pop.lua prepends to an id to find its bucket. */
    public function bucketPrefix(): string
    {
        return $this->prefix . 'job_bucket:';
    }

    /** `<prefix>job_bucket:<id>`: the HASH holding one job's topic and body. */
    public function bucket(string $id): string
    {
        return $this->bucketPrefix() . $id;
    }

    /** `<prefix>ready_queue:<topic>`: the LIST of due ids of one topic. */
    public function readyQueue(string $topic): string
    {
        return $this->prefix . 'ready_queue:' . $topic;
    }

    /** `<prefix>malformed`: the LIST where unroutable ids are parked. */
    public function malformed(): string
    {
        return $this->prefix . 'malformed';
    }
}
