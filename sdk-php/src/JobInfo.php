<?php

declare(strict_types=1);

namespace Delayer;

/**
 * Where one job is and what it carries ({@see Client::job()}). What does not
 * apply to the state, or is not known, is null. Times are Unix seconds
 * (Redis's clock, millisecond precision).
 */
final class JobInfo
{
    /** States {@see Client::job()} reports. */
    public const STATES = ['scheduled', 'ready', 'reserved', 'dead', 'malformed', 'unknown'];

    /**
     * @param string      $id          the id looked up
     * @param string      $state       one of {@see self::STATES}
     * @param string|null $topic       its topic
     * @param int|null    $bodySize    its body's length in bytes
     * @param int|null    $attempts    reservations so far
     * @param int|null    $maxAttempts reservations allowed (0: no limit), when set
     * @param float|null  $due         scheduled: when it is due
     * @param float|null  $deadline    reserved: the reservation's deadline
     * @param float|null  $deadAt      dead: when it died
     * @param string|null $deadReason  dead: "buried" or "max_attempts"
     * @param string|null $lastError   the last failed attempt's error, when a worker gave one
     * @param string|null $traceparent the W3C trace context it was pushed with, if any
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
    ) {
    }
}
