<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A job as a {@see Worker} hands it to a handler: the job's data, and, at
 * least once, a way to keep its reservation while the handler runs long.
 *
 *     $worker->handle('report', function (Job $job) use ($client): void {
 *         foreach (chunks($job->body) as $chunk) {
 *             render($chunk);
 *             $job->touch();          // the ttr again from now
 *         }
 *     });
 *
 * The worker also touches by itself once half the ttr has passed (see
 * Worker's autoTouch); an explicit touch() or extend() is for ttrs too short
 * for that, or a worker running without pcntl.
 *
 * It exists apart from {@see ReservedMessage} because it is bound to the
 * client and ttr the worker reserved it with, and follows the deadline as
 * touches move it; a ReservedMessage is immutable.
 */
final class Job
{
    use JobAccessors;

    /** The job id. */
    public readonly string $id;

    /** The topic (the one whose handler runs it). */
    public readonly string $topic;

    /** The body (raw bytes, may be empty). */
    public readonly string $body;

    /** Reservations so far, this one included (1 on the first delivery); 1 at most once. */
    public readonly int $attempts;

    /** Reservations allowed before dead letters (0 = no limit); 0 at most once. */
    public readonly int $maxAttempts;

    /** The producer's W3C trace context given at push, or null ({@see Traceparent}): pass-through only. */
    public readonly ?string $traceparent;

    /** The reservation (at least once), or null when the job was popped (at most once). */
    public readonly ?ReservedMessage $reservation;

    /** Redis's clock when the job was reserved (its first deadline less the ttr), Unix seconds. */
    private readonly float $reservedAt;

    /** hrtime when the reservation arrived, seconds: with $reservedAt, Redis's clock now. */
    private readonly float $arrivedAt;

    private ?float $deadline;

    private bool $lost = false;

    /**
     * @internal built by {@see Worker}
     *
     * @param float $ttr the ttr the job was reserved with, seconds
     */
    public function __construct(
        string $topic,
        Message|ReservedMessage $job,
        private readonly Client $client,
        public readonly float $ttr,
    ) {
        $this->topic = $topic;
        $this->id = $job->id;
        $this->body = $job->body;
        $this->traceparent = $job->traceparent;
        $this->reservation = $job instanceof ReservedMessage ? $job : null;
        $this->attempts = $job instanceof ReservedMessage ? $job->attempts : 1;
        $this->maxAttempts = $job instanceof ReservedMessage ? $job->maxAttempts : 0;
        $this->deadline = $job instanceof ReservedMessage ? $job->deadline : null;
        $this->reservedAt = ($this->deadline ?? 0.0) - $ttr;
        $this->arrivedAt = self::now();
    }

    /**
     * When the reservation runs out, Unix seconds (Redis's clock), as the
     * last reserve or touch said; null at most once.
     */
    public function deadline(): ?float
    {
        return $this->deadline;
    }

    /**
     * Extends the reservation: its deadline becomes $ttr seconds from now
     * (the handler's ttr when null). See {@see Client::touch()}.
     *
     * @return float|false the new deadline, or false when the reservation is
     *                     no longer held (the ttr ran out and the job went back,
     *                     or it was removed): the job may be running elsewhere
     *                     now, and its ack will fail
     * @throws \LogicException                         at most once (nothing is reserved)
     * @throws Exception\InvalidArgumentException      on a bad ttr
     * @throws Exception\ConnectionException           when Redis cannot be reached
     * @throws Exception\RedisErrorException           when Redis refused the command
     */
    public function touch(int|float|null $ttr = null): float|false
    {
        return $this->touchVia($this->client, $ttr ?? $this->ttr);
    }

    /**
     * Pushes the deadline $seconds later than it is now (than the last
     * reserve, touch or extend set it). A deadline already passed is moved
     * to $seconds from now.
     *
     * @param int|float $seconds more than 0
     * @return float|false as touch()
     * @throws \LogicException                    at most once
     * @throws Exception\InvalidArgumentException on a bad number of seconds
     * @throws Exception\ConnectionException      when Redis cannot be reached
     * @throws Exception\RedisErrorException      when Redis refused the command
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

    /**
     * Seconds left before the deadline, by Redis's clock as seen at the
     * reservation plus the time since (INF at most once).
     *
     * @internal
     */
    public function remaining(): float
    {
        if ($this->deadline === null) {
            return INF;
        }
        return $this->deadline - ($this->reservedAt + (self::now() - $this->arrivedAt));
    }

    /**
     * A touch through $client (the worker's own connection for touches made
     * from its alarm signal).
     *
     * @internal
     */
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

    private static function now(): float
    {
        return hrtime(true) / 1e9;
    }
}
