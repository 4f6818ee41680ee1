<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job on a topic's dead-letter list ({@see Client::deadLetters()}),
 * buried or out of attempts, kept until requeueDead() or purgeDead().
 */
final class DeadLetter
{
    /** Its reason: bury(), or attempts reached max_attempts. */
    public const BURIED = 'buried';

    public const MAX_ATTEMPTS = 'max_attempts';

    /**
     * @param float   $deadAt    Unix seconds (Redis's clock)
     * @param ?string $lastError why its last attempt failed (or "ttr expired"); null when none said
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
