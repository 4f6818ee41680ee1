<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

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
 * and one pub/sub channel (not a key): `<prefix>wake`, where the scripts
 * that write a score earlier than its set's head (push, push_many, release,
 * reschedule, a dead-letter requeue, reserve, touch) announce "<time>
 * <topic>", so that a sleeping server wakes for it and, in the per-topic
 * layout, keeps its index (`<prefix>due`, `<prefix>topics`). The SDK never
 * writes the index: every operation is one script call.
 *
 * The prefix is prepended as is ("shop:delayer:" gives "shop:delayer:job_pool").
 * Scripts get every name they touch as a key, or as a per-kind prefix
 * (`*Prefix()`) for names that depend on data they read; they never build one.
 * Ids and topics are expected to be validated already ({@see Validator}).
 *
 * The per-topic layout (`layout = topic`, docs/PROTOCOL.md "The per-topic
 * layout") keeps everything of one topic in one hash slot:
 *
 * | key                           | type   | content                                    |
 * | ----------------------------- | ------ | ------------------------------------------ |
 * | <prefix>{<topic>}:pool        | ZSET   | the topic's waiting ids, score = due time  |
 * | <prefix>{<topic>}:job:<id>    | HASH   | the job (as the bucket)                    |
 * | <prefix>{<topic>}:ready       | LIST   | the topic's due ids                        |
 * | <prefix>{<topic>}:reserved    | ZSET   | reserved ids, score = deadline (Unix ms)   |
 * | <prefix>{<topic>}:dead        | LIST   | dead letters, newest at the left           |
 * | <prefix>{<topic>}:malformed   | LIST   | the topic's unroutable ids                 |
 * | <prefix>{<topic>}:receipt_seq | STRING | the topic's receipt counter                |
 * | <prefix>due                   | ZSET   | the server's index: topic => earliest time |
 * | <prefix>topics                | SET    | the server's index: every topic announced  |
 *
 * A call gets the names it needs for its topic from {@see names()} (one
 * {@see Names}, whichever the layout), and its topic checked by
 * {@see topic()} / {@see idTopic()}, so the call layer ({@see Calls}, the
 * client) holds no layout branch: every one is here or in {@see Names}. The methods named after the classic keys
 * (pool(), bucket(), readyQueue(), ...) give the classic layout's names
 * whatever the layout (1.x's constants and tools read them); in the
 * per-topic layout a topic's names are names($topic)'s.
 */
final class Keys
{
    /** The default key prefix, shared with the server's `key_prefix`. */
    public const DEFAULT_PREFIX = 'delayer:';

    /** The classic layout (Delayer 1.x's): shared keys, ids global across topics. */
    public const CLASSIC = 'classic';

    /** The per-topic layout: every topic's keys in one hash slot, ids per topic. */
    public const TOPIC = 'topic';

    /** The layouts, as `[delayer] layout` and the `layout` option name them. */
    public const LAYOUTS = [self::CLASSIC, self::TOPIC];

    /**
     * @param string $prefix the key prefix, as the server's key_prefix
     * @param string $layout {@see CLASSIC} or {@see TOPIC}
     * @throws InvalidArgumentException on another layout, or a per-topic
     *                                  layout's prefix holding "{" or "}"
     */
    public function __construct(
        private readonly string $prefix = self::DEFAULT_PREFIX,
        private readonly string $layout = self::CLASSIC,
    ) {
        if (!\in_array($layout, self::LAYOUTS, true)) {
            throw new InvalidArgumentException(sprintf('layout "%s" is not one of classic, topic', $layout));
        }
        if ($layout === self::TOPIC && strpbrk($prefix, '{}') !== false) {
            // The hash tag is the first {...} of a name: a brace in the
            // prefix would make it the prefix's, one slot for every topic.
            throw new InvalidArgumentException(sprintf(
                'key prefix "%s" may not contain "{" or "}" in the per-topic layout',
                $prefix
            ));
        }
    }

    /** The key layout: {@see CLASSIC} or {@see TOPIC}. */
    public function layout(): string
    {
        return $this->layout;
    }

    /** Whether this is the per-topic layout. */
    public function isPerTopic(): bool
    {
        return $this->layout === self::TOPIC;
    }

    /**
     * A checked topic: {@see Validator::name()}'s rules, and in the
     * per-topic layout no "{" or "}" (Redis hashes the text between the
     * first "{" and the next "}", so a brace in a topic would cut its hash
     * tag short and could scatter the topic's keys over slots).
     *
     * @throws InvalidArgumentException
     */
    public function topic(mixed $value): string
    {
        $topic = Validator::name('topic', $value);
        if ($this->layout === self::TOPIC && strpbrk($topic, '{}') !== false) {
            throw new InvalidArgumentException(sprintf('topic "%s" may not contain "{" or "}" in the per-topic layout', $topic));
        }
        return $topic;
    }

    /**
     * The topic of an id-only call (remove, reschedule, ack, touch, release,
     * bury by id): checked when given; required in the per-topic layout,
     * where ids are per topic. In the classic layout it is checked and
     * otherwise not needed (ids are global): null when not given.
     *
     * @param string $usage how to pass it, for the message: "remove($id, $topic)"
     * @throws InvalidArgumentException
     */
    public function idTopic(mixed $topic, string $call, string $usage): ?string
    {
        if ($topic !== null) {
            return $this->topic($topic);
        }
        if ($this->layout === self::TOPIC) {
            throw new InvalidArgumentException("{$call}() needs the topic in the per-topic layout: {$usage}");
        }
        return null;
    }

    /**
     * The names one call needs, for $topic: in the classic layout the shared
     * keys (and the topic's ready queue and dead-letter list when $topic is
     * given; id-only calls pass null), in the per-topic layout the topic's
     * own keys, with no scheduled counts. The wake channel is the same in
     * both: the scripts announce on it, and the server keeps its index.
     *
     * @param string|null $topic a checked topic; null only in the classic layout
     */
    public function names(?string $topic): Names
    {
        if ($this->layout === self::CLASSIC) {
            return new Names(
                $topic,
                $this->pool(),
                $this->bucketPrefix(),
                $topic === null ? null : $this->readyQueue($topic),
                $this->malformed(),
                $this->reserved(),
                $this->receiptSeq(),
                $topic === null ? null : $this->dead($topic),
                $this->deadPrefix(),
                $this->scheduledCount(),
                $this->wake(),
                $this->outcomes(),
            );
        }
        if ($topic === null) {
            throw new \LogicException('the per-topic layout names a topic for every call');
        }
        $of = fn (string $kind): string => "{$this->prefix}{{$topic}}:{$kind}";
        return new Names($topic, $of('pool'), $of('job:'), $of('ready'), $of('malformed'), $of('reserved'), $of('receipt_seq'), $of('dead'), '', null, $this->wake(), $of('outcomes'));
    }

    /**
     * `<prefix>due`: the per-topic layout's index, topic => the earliest
     * time (Unix seconds) the topic needs the server: a due time or a
     * reservation deadline.
     */
    public function due(): string
    {
        return $this->prefix . 'due';
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

    /**
     * `<prefix>topics`: the SET of the topics the server has moved jobs of
     * (classic), of every topic pushed to (per-topic layout).
     */
    public function topics(): string
    {
        return $this->prefix . 'topics';
    }

    /**
     * `<prefix>outcomes`: the HASH of ended reservations per outcome and
     * topic (`acked:<topic>` => count), which the server exports.
     */
    public function outcomes(): string
    {
        return $this->prefix . 'outcomes';
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
