<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job on a topic's dead-letter list ({@see Client::deadLetters()}): it was
 * buried, or failed max_attempts times. It is kept, without expiry, until
 * {@see Client::requeueDead()} or {@see Client::purgeDead()}.
 */
final class DeadLetter
{
    /** Reason of a job given up by {@see Client::bury()}. */
    public const BURIED = 'buried';

    /** Reason of a job whose attempts reached its max_attempts. */
    public const MAX_ATTEMPTS = 'max_attempts';

    /**
     * @param string $id       the job id
     * @param string $topic    its topic
     * @param string $body     its body (raw bytes)
     * @param int    $attempts how many times it was reserved
     * @param string $reason   "buried" or "max_attempts"
     * @param float  $deadAt   when it died, Unix seconds (Redis's clock, ms precision)
     * @param ?string $lastError why its last attempt failed, as the worker said
     *                          (release or bury with an error) or "ttr expired";
     *                          null when no attempt gave one
     */
    public function __construct(
        public readonly string $id,
        public readonly string $topic,
        public readonly string $body,
        public readonly int $attempts,
        public readonly string $reason,
        public readonly float $deadAt,
        public readonly ?string $lastError = null,
    ) {
    }
}
