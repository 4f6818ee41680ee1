<?php

declare(strict_types=1);

namespace Delayer;

/** Per-topic numbers, sorted by topic, and totals that count every job ({@see Client::stats()}). */
final class Stats
{
    /** Per-topic reserved counts are read while the reserved set is no larger. */
    public const RESERVED_CAP = 1000;

    /** @param list<TopicStats> $topics */
    public function __construct(
        public readonly int $scheduledTotal,
        public readonly int $reservedTotal,
        public readonly array $topics,
    ) {
    }
}
