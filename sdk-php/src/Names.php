<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The key names one call needs, for one topic, in the client's layout
 * (built by {@see Keys::names()}, the only place names are made): the call
 * builders ({@see Calls}) take these, so they are the same for both
 * layouts; where a script's KEYS differ with the layout, the method here
 * that gives them says so ({@see withCounts()}, {@see countsOrDead()}).
 *
 * Per-kind prefixes ($bucketPrefix, $deadPrefix) are what a script appends
 * an id or topic to; {@see bucket()} does the same for the one id a call
 * names.
 *
 * @internal used by {@see Calls} and {@see Client}
 */
final class Names
{
    /**
     * @param string|null $topic          the call's topic (null: an id-only call, classic layout)
     * @param string      $pool           the ZSET of waiting ids
     * @param string      $bucketPrefix   what a bucket's name is before the id
     * @param string|null $ready          the topic's ready list (null without a topic)
     * @param string      $malformed      where unroutable ids are parked
     * @param string      $reserved       the ZSET of reservations
     * @param string      $receiptSeq     the receipt counter
     * @param string|null $dead           the topic's dead-letter list (null without a topic)
     * @param string      $deadPrefix     release.lua's dead-letter prefix: "" in the
     *                                    per-topic layout (its KEYS[4] is $dead then)
     * @param string|null $scheduledCount the scheduled counts; null in the per-topic layout
     * @param string      $wake           the wake channel the scripts announce on
     * @param string      $outcomes       the HASH ended reservations are counted in
     *                                    (ack, release and reserve's acks write it)
     */
    public function __construct(
        public readonly ?string $topic,
        public readonly string $pool,
        public readonly string $bucketPrefix,
        public readonly ?string $ready,
        public readonly string $malformed,
        public readonly string $reserved,
        public readonly string $receiptSeq,
        public readonly ?string $dead,
        public readonly string $deadPrefix,
        public readonly ?string $scheduledCount,
        public readonly string $wake,
        public readonly string $outcomes,
    ) {
    }

    /**
     * KEYS with the scheduled counts appended where the layout keeps them
     * (classic): push.lua's KEYS[3], push_many.lua's and dead.lua's, remove.lua's.
     *
     * @param list<string> $keys
     * @return list<string>
     */
    public function withCounts(array $keys): array
    {
        if ($this->scheduledCount !== null) {
            $keys[] = $this->scheduledCount;
        }
        return $keys;
    }

    /**
     * release.lua's KEYS[4]: the scheduled counts (classic), or the topic's
     * dead list (per-topic layout, where its ARGV[2] dead prefix is "").
     */
    public function countsOrDead(): string
    {
        return $this->scheduledCount ?? (string) $this->dead;
    }

    /** The bucket (job HASH) of one id. */
    public function bucket(string $id): string
    {
        return $this->bucketPrefix . $id;
    }
}
