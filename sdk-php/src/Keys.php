<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The one place where this SDK builds Redis key names (docs/PROTOCOL.md, "Keys").
 *
 * | key                           | type   | content                                    |
 * | ----------------------------- | ------ | ------------------------------------------ |
 * | <prefix>job_pool              | ZSET   | member = job id, score = due time (Unix s) |
 * | <prefix>job_bucket:<id>       | HASH   | topic, body (+ retry fields); has a TTL    |
 * | <prefix>ready_queue:<topic>   | LIST   | due ids, first due at the right end        |
 * | <prefix>malformed             | LIST   | ids whose bucket could not be routed       |
 * | <prefix>reserved              | ZSET   | reserved ids, score = deadline (Unix s)    |
 * | <prefix>dead:<topic>          | LIST   | ids that failed for good, newest at left   |
 * | <prefix>receipt_seq           | STRING | the last reservation receipt handed out    |
 *
 * and one pub/sub channel (not a key): `<prefix>wake`, where push, pushMany,
 * release and reschedule publish a due time earlier than the pool's head, so
 * that a sleeping server wakes for it.
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

    /**
     * `<prefix>reserved`: the ZSET of ids handed out by reserve and not yet
     * acked, released or buried, scored by the reservation's deadline.
     */
    public function reserved(): string
    {
        return $this->prefix . 'reserved';
    }

    /** `<prefix>dead:<topic>`: the LIST of one topic's dead letters, newest at the left. */
    public function dead(string $topic): string
    {
        return $this->prefix . 'dead:' . $topic;
    }

    /** `<prefix>receipt_seq`: the counter reserve.lua takes receipts from (INCR). */
    public function receiptSeq(): string
    {
        return $this->prefix . 'receipt_seq';
    }

    /**
     * `<prefix>wake`: the pub/sub channel (not a key) the scripts publish a
     * new earliest due time on, so that a sleeping server wakes for it.
     */
    public function wake(): string
    {
        return $this->prefix . 'wake';
    }
}
