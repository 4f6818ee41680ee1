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
 * | <prefix>scheduled_count       | HASH   | topic => jobs waiting in the pool          |
 * | <prefix>topics                | SET    | topics the server has moved jobs of        |
 *
 * and one pub/sub channel (not a key): `<prefix>wake`, where push, pushMany,
 * release and reschedule publish a due time earlier than the pool's head, so
 * that a sleeping server wakes for it.
 *
 * The prefix is prepended as is ("shop:delayer:" gives "shop:delayer:job_pool").
 * Scripts get every name they touch as a key, or as a per-kind prefix
 * (`*Prefix()`) for names that depend on data they read; they never build one.
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

    /** `<prefix>ready_queue:`: what every ready queue's name starts with. */
    public function readyQueuePrefix(): string
    {
        return $this->prefix . 'ready_queue:';
    }

    /** `<prefix>ready_queue:<topic>`: the LIST of due ids of one topic. */
    public function readyQueue(string $topic): string
    {
        return $this->readyQueuePrefix() . $topic;
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

    /** `<prefix>dead:`: what every dead-letter list's name starts with. */
    public function deadPrefix(): string
    {
        return $this->prefix . 'dead:';
    }

    /** `<prefix>dead:<topic>`: the LIST of one topic's dead letters, newest at the left. */
    public function dead(string $topic): string
    {
        return $this->deadPrefix() . $topic;
    }

    /** `<prefix>scheduled_count`: the HASH of jobs waiting in the pool per topic. */
    public function scheduledCount(): string
    {
        return $this->prefix . 'scheduled_count';
    }

    /** `<prefix>topics`: the SET of the topics the server has moved jobs of. */
    public function topics(): string
    {
        return $this->prefix . 'topics';
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
