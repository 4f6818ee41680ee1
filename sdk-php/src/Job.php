<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job as a {@see Worker} hands it to a handler: its data and, at least once,
 * touch() to keep the reservation. Apart from the immutable {@see ReservedMessage}:
 * it follows the deadline as touches move it.
 */
final class Job
{
    use JobAccessors;

    public readonly string $id;

    public readonly string $body;

    /** Reservations so far, this one included (1 on the first delivery); 1 at most once. */
    public readonly int $attempts;

    /** Reservations allowed before dead letters (0 = no limit); 0 at most once. */
    public readonly int $maxAttempts;

    /** The producer's W3C trace context given at push, or null ({@see Traceparent}). */
    public readonly ?string $traceparent;

    /** The reservation (at least once), or null when the job was popped (at most once). */
    public readonly ?ReservedMessage $reservation;

    /** Redis's clock at the reservation (deadline less ttr), and hrtime then: with both, Redis's clock now. */
    private readonly float $reservedAt;

    private readonly float $arrivedAt;

    private ?float $deadline;

    private bool $lost = false;

    /** @internal built by {@see Worker}; $ttr the one it was reserved with */
    public function __construct(
        public readonly string $topic,
        Message|ReservedMessage $job,
        private readonly Client $client,
        public readonly float $ttr,
    ) {
        $this->id = $job->id;
        $this->body = $job->body;
        $this->traceparent = $job->traceparent;
        $this->reservation = $job instanceof ReservedMessage ? $job : null;
        $this->attempts = $job instanceof ReservedMessage ? $job->attempts : 1;
        $this->maxAttempts = $job instanceof ReservedMessage ? $job->maxAttempts : 0;
        $this->deadline = $job instanceof ReservedMessage ? $job->deadline : null;
        $this->reservedAt = ($this->deadline ?? 0.0) - $ttr;
        $this->arrivedAt = BlockingWait::now();
    }

    /** When the reservation runs out, Unix seconds (Redis's clock) as the last reserve or touch said; null at most once. */
    public function deadline(): ?float
    {
        return $this->deadline;
    }

    /**
     * Extends the reservation to $ttr seconds from now (null: the handler's ttr); {@see Client::touch()}.
     *
     * @return float|false the new deadline, or false when no longer held (the job may run elsewhere now)
     * @throws \LogicException at most once (nothing is reserved)
     */
    public function touch(int|float|null $ttr = null): float|false
    {
        return $this->touchVia($this->client, $ttr ?? $this->ttr);
    }

    /**
     * Moves the deadline $seconds later than it is (from now if already passed).
     *
     * @return float|false as touch()
     * @throws \LogicException at most once
     */
    public function extend(int|float $seconds): float|false
    {
        Validator::ttrMs($seconds); // the same range as a ttr, with the same message
        $left = max($this->remaining(), 0.0);
        return $this->touchVia($this->client, $left + $seconds);
    }

    /** Whether a failure now sends the job to dead letters (always false at most once). */
    public function isLastAttempt(): bool
    {
        return $this->reservation?->isLastAttempt() ?? false;
    }

    /** Whether a touch found the reservation no longer held (the job may run elsewhere). */
    public function isReservationLost(): bool
    {
        return $this->lost;
    }

    /** @internal seconds left before the deadline by Redis's clock (INF at most once) */
    public function remaining(): float
    {
        if ($this->deadline === null) {
            return INF;
        }
        return $this->deadline - ($this->reservedAt + (BlockingWait::now() - $this->arrivedAt));
    }

    /** @internal a touch through $client (the worker's own connection, from its alarm signal) */
    public function touchVia(Client $client, int|float $ttr): float|false
    {
        if ($this->reservation === null) {
            throw new \LogicException('a job taken at most once holds no reservation to touch');
        }
        $deadline = $client->touch($this->reservation, $ttr);
        if ($deadline === false) {
            $this->lost = true;
        } else {
            $this->deadline = $deadline;
        }
        return $deadline;
    }
}
