<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job handed out by {@see Client::reserve()} or {@see Client::bReserve()}.
 *
 * Unlike a popped {@see Message}, the job is still in Redis, reserved for
 * this worker: end the reservation with {@see Client::ack()} (done),
 * {@see Client::release()} (try again later) or {@see Client::bury()} (give
 * up). Until then no other worker gets it; after {@see $deadline} a Delayer
 * 2 server counts a failed attempt and delivers it again, unless
 * {@see Client::touch()} extended the reservation.
 *
 * The receipt names this reservation: ack, release and bury given this
 * object act on it only, so a worker that overran its ttr cannot end the
 * reservation of the worker that got the job next.
 */
final class ReservedMessage
{
    use JobAccessors;

    /**
     * @param string $id          the job id
     * @param string $topic       the topic it was pushed to
     * @param string $body        the body (raw bytes, may be empty)
     * @param int    $attempts    reservations so far, this one included (1 on the first delivery)
     * @param int    $maxAttempts reservations allowed before the job goes to dead letters; 0 = no limit
     * @param string $receipt     names this reservation
     * @param float  $deadline    when the reservation runs out, Unix seconds (Redis's clock, ms precision)
     * @param string|null $traceparent the producer's W3C trace context given at push, or null ({@see Traceparent})
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
