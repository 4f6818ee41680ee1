<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * The one place where this SDK builds Redis key names and knows the key
 * layout (docs/PROTOCOL.md, "Keys" and "The per-topic layout"): a call gets
 * its topic's names and scripts from {@see names()}, so the call layer holds
 * no layout branch; scripts never build a name. The methods named after the
 * classic keys (pool(), bucket(), ...) give the classic layout's names
 * whatever the layout (1.x's constants and tools read them).
 */
final class Keys
{
    /** The default key prefix, as the server's `key_prefix`. */
    public const DEFAULT_PREFIX = 'delayer:';

    /** The classic layout (1.x's: shared keys, ids global) and the per-topic one (a topic's keys in one slot, ids per topic). */
    public const CLASSIC = 'classic';
    public const TOPIC = 'topic';
    public const LAYOUTS = [self::CLASSIC, self::TOPIC];

    /** @throws InvalidArgumentException on another layout, or a per-topic layout's prefix with "{" or "}" */
    public function __construct(
        private readonly string $prefix = self::DEFAULT_PREFIX,
        private readonly string $layout = self::CLASSIC,
    ) {
        if (!\in_array($layout, self::LAYOUTS, true)) {
            throw new InvalidArgumentException(sprintf('layout "%s" is not one of classic, topic', $layout));
        }
        if ($layout === self::TOPIC && strpbrk($prefix, '{}') !== false) {
            // The hash tag is a name's first {...}: the prefix's would put every topic in one slot.
            throw new InvalidArgumentException(sprintf('key prefix "%s" may not contain "{" or "}" in the per-topic layout', $prefix));
        }
    }

    public function layout(): string
    {
        return $this->layout;
    }

    public function isPerTopic(): bool
    {
        return $this->layout === self::TOPIC;
    }

    /** A checked topic; in the per-topic layout without "{" or "}", which would scatter its keys over slots. */
    public function topic(mixed $value): string
    {
        $topic = Validator::name('topic', $value);
        if ($this->layout === self::TOPIC && strpbrk($topic, '{}') !== false) {
            throw new InvalidArgumentException(sprintf('topic "%s" may not contain "{" or "}" in the per-topic layout', $topic));
        }
        return $topic;
    }

    /**
     * The topic of an id-only call (remove, ack, ...): checked when given, required in the per-topic layout.
     *
     * @param string $usage how to pass it, for the message: "remove($id, $topic)"
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

    /** The names one call needs: the shared keys and classic scripts, or the topic's own keys and _topic scripts. */
    public function names(?string $topic): Names
    {
        if ($this->layout === self::CLASSIC) {
            return new Names($topic, $this->pool(), $this->bucketPrefix(), $topic === null ? null : $this->readyQueue($topic),
                $this->malformed(), $this->reserved(), $this->receiptSeq(), $topic === null ? null : $this->dead($topic),
                $this->wake(), $this->outcomes(), [], [$this->scheduledCount()], $this->scheduledCount(),
                [$this->bucketPrefix(), $this->deadPrefix()], $topic === null ? null : $this->flow($topic),
                $topic === null ? null : $this->gate($topic), $this->flowPoolPrefix(), [$this->flowPoolPrefix()],
                $topic === null ? [] : [$this->flowTopics(), $this->flowPool($topic)]);
        }
        if ($topic === null) {
            throw new \LogicException('the per-topic layout names a topic for every call');
        }
        $of = fn (string $kind): string => "{$this->prefix}{{$topic}}:{$kind}";
        return new Names($topic, $of('pool'), $of('job:'), $of('ready'), $of('malformed'), $of('reserved'), $of('receipt_seq'), $of('dead'),
            $this->wake(), $of('outcomes'), Scripts::PER_TOPIC, [], $of('dead'), [$of('job:')], $of('flow'), $of('gate'), '', [], [$of('pool')]);
    }

    /** `<prefix>due`: the per-topic layout's index, topic => earliest time the server is needed. */
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

    /** `<prefix>reserved`: the ZSET of reserved ids, scored by deadline. */
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

    /** `<prefix>flow:<topic>`: the HASH of one topic's flow control (field "paused" while paused). */
    public function flow(string $topic): string
    {
        return $this->flowPrefix() . $topic;
    }

    /** `<prefix>flow:`: what every classic flow hash's name starts with. */
    public function flowPrefix(): string
    {
        return $this->prefix . 'flow:';
    }

    /** `<prefix>flow_gate:<topic>`: the LIST a resume writes, which waiters on a paused topic block on. */
    public function gate(string $topic): string
    {
        return $this->prefix . 'flow_gate:' . $topic;
    }

    /** `<prefix>flow_pool:<topic>`: the ZSET of one topic's due ids set aside while it is paused or rate limited (score: due time). */
    public function flowPool(string $topic): string
    {
        return $this->flowPoolPrefix() . $topic;
    }

    /** `<prefix>flow_pool:`: what every flow pool's name starts with. */
    public function flowPoolPrefix(): string
    {
        return $this->prefix . 'flow_pool:';
    }

    /** `<prefix>flow_topics`: the SET of topics under flow control, or whose flow pool still holds ids. */
    public function flowTopics(): string
    {
        return $this->prefix . 'flow_topics';
    }

    /** `<prefix>scheduled_count`: the HASH of jobs waiting in the pool per topic. */
    public function scheduledCount(): string
    {
        return $this->prefix . 'scheduled_count';
    }

    /** `<prefix>topics`: the SET of topics moved (classic) or pushed to (per-topic layout). */
    public function topics(): string
    {
        return $this->prefix . 'topics';
    }

    /** `<prefix>outcomes`: ended reservations per outcome and topic, which the server exports. */
    public function outcomes(): string
    {
        return $this->prefix . 'outcomes';
    }

    /** `<prefix>receipt_seq`: the counter reserve.lua takes receipts from (INCR). */
    public function receiptSeq(): string
    {
        return $this->prefix . 'receipt_seq';
    }

    /** `<prefix>wake`: the pub/sub channel (not a key) the scripts announce new due times on. */
    public function wake(): string
    {
        return $this->prefix . 'wake';
    }
}
