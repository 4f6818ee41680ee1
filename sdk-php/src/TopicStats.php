<?php

declare(strict_types=1);

namespace Delayer;

/**
 * One topic's numbers ({@see Client::stats()}). $reserved is null when too
 * many jobs are reserved to count per topic.
 */
final class TopicStats
{
    public function __construct(
        public readonly string $topic,
        public readonly int $scheduled,
        public readonly int $ready,
        public readonly ?int $reserved,
        public readonly int $dead,
    ) {
    }
}
