<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * At least once (docs/PROTOCOL.md, "Reliable delivery"): jobs handed out
 * reserved for a time-to-run, then acked, touched, released or buried.
 *
 * Given a ReservedMessage, a call acts on that reservation only (its
 * receipt), so a worker that overran its ttr changes nothing. Given an id,
 * on the reservation $receipt names (null: the current one); $topic is
 * needed with an id in the per-topic layout. false always means "not held, nothing changed".
 */
trait Reservations
{
    /**
     * Takes the next ready job of a topic, without waiting, reserved for $ttr
     * seconds: past its ttr the server counts a failed attempt and delivers it again.
     *
     * @param int|float $ttr seconds, more than 0, at most 315360000, rounded to the millisecond (at least 1 ms)
     * @throws InvalidArgumentException on a bad topic or ttr
     */
    public function reserve(string $topic, int|float $ttr): ReservedMessage|false
    {
        $topic = $this->keys->topic($topic);
        return $this->runReserve($topic, Validator::ttrMs($ttr));
    }

    /**
     * reserve(), waiting up to $timeout seconds (0: forever); the wait (BLMOVE
     * of the ready queue onto itself) takes nothing, so dying mid-wait loses no id.
     *
     * @throws InvalidArgumentException on a bad topic, ttr or timeout
     */
    public function bReserve(string $topic, int|float $ttr, int|float $timeout = 0): ReservedMessage|false
    {
        return $this->waitReserved($topic, $ttr, $timeout, true);
    }

    /**
     * bReserve(); $claimFirst false when the caller has just tried reserve() on $topic (a Worker's
     * round): the wait then starts with its BLMOVE, which takes nothing, so nothing is claimed twice.
     *
     * @internal for {@see Worker}
     */
    public function waitReserved(string $topic, int|float $ttr, int|float $timeout, bool $claimFirst): ReservedMessage|false
    {
        $topic = $this->keys->topic($topic);
        $call = Calls::reserve($this->keys, $topic, Validator::ttrMs($ttr));
        $timeout = Validator::timeout($timeout);
        $queue = (string) $this->keys->names($topic)->ready;
        $claim = fn (): ReservedMessage|array|false => Replies::wait($reply = $this->connection->script(...$call)) ?? Replies::reserve($reply);
        $block = function (float $wait) use ($queue, $claim): ReservedMessage|array|false|null {
            return $this->connection->blocking('BLMOVE', [$queue, $queue, 'RIGHT', 'RIGHT'], $wait) === null ? null : $claim();
        };
        return BlockingWait::until($timeout, $this->connection, $claimFirst ? $claim : fn (): bool => false, $block, $claim);
    }

    /**
     * Acks finished reservations, then reserves up to $n (0 to 1000) jobs of
     * $topic, in one call, without waiting. A call lost with its connection may
     * have run: its acks sent again return false, its jobs come back after their ttr.
     *
     * @param list<ReservedMessage|string> $acks at most 1000: a ReservedMessage, or an id (its
     *        current reservation, of $topic)
     * @return array{0: list<bool>, 1: list<ReservedMessage>} a flag per ack, in order (as ack()'s), and the jobs
     * @throws InvalidArgumentException on a bad topic, ttr, n or ack (nothing is sent)
     */
    public function reserveMany(string $topic, int|float $ttr, int $n, array $acks = []): array
    {
        $topic = $this->keys->topic($topic);
        $ttrMs = Validator::ttrMs($ttr);
        if ($n < 0 || $n > Scripts::RESERVE_MAX_JOBS) {
            throw new InvalidArgumentException(sprintf('n must be from 0 to %d, got %d', Scripts::RESERVE_MAX_JOBS, $n));
        }
        if (\count($acks) > Scripts::RESERVE_MAX_JOBS) {
            throw new InvalidArgumentException(sprintf('at most %d acks per call, got %d', Scripts::RESERVE_MAX_JOBS, \count($acks)));
        }
        $reserved = $this->keys->names($topic)->reserved;
        $pairs = [];
        $elsewhere = []; // position in $acks => [id, receipt, topic]
        foreach (array_values($acks) as $i => $job) {
            if (!$job instanceof ReservedMessage && !\is_string($job) && !\is_int($job)) {
                $key = var_export(array_keys($acks)[$i], true);
                throw new InvalidArgumentException(sprintf('acks[%s] must be a ReservedMessage or a job id, got %s', $key, get_debug_type($job)));
            }
            [$id, $receipt] = Calls::reservation($job, null);
            // an ack of a topic whose reserved set is not this call's (per-topic layout) goes alone
            if ($job instanceof ReservedMessage && $this->keys->names($job->topic)->reserved !== $reserved) {
                $elsewhere[$i] = [$id, $receipt, $job->topic];
            } else {
                $pairs[$i] = [$id, $receipt];
            }
        }
        // Acks first, as in one call: those of other topics by ack.lua on theirs.
        $flags = [];
        foreach ($elsewhere as $i => [$id, $receipt, $of]) {
            $flags[$i] = Replies::ack($this->connection->script(...Calls::ack($this->keys, $id, $receipt, $of)));
        }
        $call = Calls::reserveMany($this->keys, $topic, $ttrMs, $n, array_values($pairs));
        [$acked, $jobs] = Replies::reserveBatch($this->connection->script(...$call), \count($pairs), $n);
        $flags += array_combine(array_keys($pairs), $acked);
        ksort($flags);
        return [array_values($flags), $jobs];
    }

    /**
     * Ends a reservation with success: the job is deleted (after the deadline too, until the server takes it back).
     *
     * @return bool whether the reservation was held
     * @throws InvalidArgumentException on a bad id or receipt
     */
    public function ack(string|ReservedMessage $job, ?string $receipt = null, ?string $topic = null): bool
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'ack');
        return Replies::ack($this->connection->script(...Calls::ack($this->keys, $id, $receipt, $topic)));
    }

    /**
     * Sets a reservation's deadline to $ttr seconds from now (a ReservedMessage keeps its first deadline).
     *
     * @return float|false the new deadline in Unix seconds, or false when not held
     * @throws InvalidArgumentException on a bad id, receipt or ttr
     */
    public function touch(string|ReservedMessage $job, int|float $ttr, ?string $receipt = null, ?string $topic = null): float|false
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'touch');
        $call = Calls::touch($this->keys, $id, $receipt, Validator::ttrMs($ttr), $topic);
        return Replies::touch($this->connection->script(...$call));
    }

    /**
     * Ends a reservation as a failed attempt: due again after $delay seconds (null: its backoff), or dead past max_attempts.
     *
     * @param string|null $error why, kept on the job (its first 1000 bytes) until pushed again or acked
     * @return bool whether the reservation was held
     * @throws InvalidArgumentException on a bad id, receipt or delay
     */
    public function release(
        string|ReservedMessage $job,
        int|float|null $delay = null,
        ?string $receipt = null,
        ?string $error = null,
        ?string $topic = null,
    ): bool {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'release');
        $action = $delay === null ? 'backoff' : (string) Validator::delayMs($delay);
        return $this->runRelease($id, $receipt, $action, $error, $topic);
    }

    /**
     * Ends a reservation by giving up: the job goes to its topic's dead letters (reason "buried").
     *
     * @return bool whether the reservation was held
     * @throws InvalidArgumentException on a bad id or receipt
     */
    public function bury(string|ReservedMessage $job, ?string $receipt = null, ?string $error = null, ?string $topic = null): bool
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'bury');
        return $this->runRelease($id, $receipt, 'bury', $error, $topic);
    }

    private function runReserve(string $topic, int $ttrMs): ReservedMessage|false
    {
        return Replies::reserve($this->connection->script(...Calls::reserve($this->keys, $topic, $ttrMs)));
    }

    private function runRelease(string $id, string $receipt, string $action, ?string $error, ?string $topic): bool
    {
        return Replies::release($this->connection->script(...Calls::release($this->keys, $id, $receipt, $action, $error ?? '', $topic))) !== false;
    }
}
