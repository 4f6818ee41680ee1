<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job handed out by reserve(): still in Redis, reserved for this worker
 * until ack(), release() or bury(), or until $deadline, when the server
 * counts a failed attempt and delivers it again. Its receipt names this
 * reservation, so a worker that overran its ttr cannot end the next one's.
 */
final class ReservedMessage
{
    use JobAccessors;

    /**
     * @param int    $attempts    reservations so far, this one included
     * @param int    $maxAttempts reservations allowed before dead letters; 0 = no limit
     * @param float  $deadline    Unix seconds (Redis's clock, ms precision)
     */
    public function __construct(
        public readonly string $id,
        public readonly string $topic,
        public readonly string $body,
        public readonly int $attempts,
        public readonly int $maxAttempts,
        public readonly string $receipt,
        public readonly float $deadline,
        public readonly ?string $traceparent = null,
    ) {
    }

    /** Whether a failure now (release, or the ttr running out) sends the job to dead letters. */
    public function isLastAttempt(): bool
    {
        return $this->maxAttempts > 0 && $this->attempts >= $this->maxAttempts;
    }
}
