<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The key names one call needs, for one topic in the client's layout
 * (made by {@see Keys::names()} only), so that {@see Calls} is the same for
 * both layouts. Per-kind prefixes are what a script appends an id or topic to.
 *
 * @internal used by {@see Calls} and {@see Client}
 */
final class Names
{
    /**
     * @param string|null $ready            the topic's ready list (null without a topic), as $dead
     * @param string      $deadPrefix       "" in the per-topic layout (release.lua's KEYS[4] is $dead then)
     * @param string|null $scheduledCount   null in the per-topic layout
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
     * KEYS with the scheduled counts appended where the layout keeps them (classic).
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

    /** release.lua's KEYS[4]: the scheduled counts (classic), or the topic's dead list. */
    public function countsOrDead(): string
    {
        return $this->scheduledCount ?? (string) $this->dead;
    }

    public function bucket(string $id): string
    {
        return $this->bucketPrefix . $id;
    }
}
