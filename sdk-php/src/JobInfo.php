<?php

declare(strict_types=1);

namespace Delayer;

/**
 * Where one job is and what it carries ({@see Client::job()}); null where
 * it does not apply or is not known. Times are Unix seconds (Redis's clock).
 */
final class JobInfo
{
    /** States {@see Client::job()} reports. */
    public const STATES = ['scheduled', 'ready', 'reserved', 'dead', 'malformed', 'unknown'];

    /**
     * @param string      $state      one of {@see self::STATES}
     * @param float|null  $due        scheduled: when due; $deadline reserved; $deadAt dead
     * @param string|null $deadReason "buried" or "max_attempts"
     * @param string|null $lastError  the last failed attempt's error, when a worker gave one
     * @param string      $flow       "paused" while the job's topic is paused (nothing of it is handed out);
     *                                "limited" while it runs under a rate limit (a due job waits for its turn, in due
     *                                order, before it becomes ready: {@see Client::setRateLimit()}); else ""
     */
    public function __construct(
        public readonly string $id,
        public readonly string $state,
        public readonly ?string $topic,
        public readonly ?int $bodySize,
        public readonly ?int $attempts,
        public readonly ?int $maxAttempts,
        public readonly ?float $due,
        public readonly ?float $deadline,
        public readonly ?float $deadAt,
        public readonly ?string $deadReason,
        public readonly ?string $lastError,
        public readonly ?string $traceparent = null,
        public readonly string $flow = '',
    ) {
    }
}
