<?php

declare(strict_types=1);

namespace Delayer;

/**
 * One topic's numbers ({@see Client::stats()}). $reserved is null when too
 * many jobs are reserved to count per topic.
 *
 * $paused: nothing of the topic is handed out (see {@see Client::pause()});
 * $pausedSince: when it was paused (Unix seconds), null while it runs, and
 * null too while paused when the flow hash holds no time (a key of the wrong
 * type, or a value that is not a time). $held: its due jobs the pause or the
 * rate limit holds back (counted in $scheduled too); 0 while it runs unlimited
 * in the per-topic layout. $rateLimit: the topic's rate limit
 * ({@see Client::setRateLimit()}), null when it has none (or the flow hash
 * holds no readable one).
 */
final class TopicStats
{
    public function __construct(
        public readonly string $topic,
        public readonly int $scheduled,
        public readonly int $ready,
        public readonly ?int $reserved,
        public readonly int $dead,
        public readonly bool $paused = false,
        public readonly ?float $pausedSince = null,
        public readonly int $held = 0,
        public readonly ?RateLimit $rateLimit = null,
    ) {
    }
}
