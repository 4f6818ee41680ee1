<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * At least once: reserve(), bReserve() and reserveMany() hand jobs out
 * reserved for a time-to-run; ack(), touch(), release() and bury() end or
 * extend a reservation.
 *
 * Apart because these are one protocol of their own (docs/PROTOCOL.md,
 * "Reliable delivery"), with its receipts and deadlines, that the 1.x
 * methods never see. Used by {@see Client}, whose connection and keys it
 * reads.
 */
trait Reservations
{
    /**
     * Takes the next ready job of a topic, if any, without waiting, and
     * keeps it reserved for this worker for $ttr seconds (at least once).
     *
     * The job stays in Redis, invisible to other consumers, until ack()
     * (done), release() (try again later) or bury() (give up) ends the
     * reservation. If none of them comes within $ttr, a Delayer 2 server
     * counts a failed attempt and delivers the job again (after its backoff,
     * or to dead letters past its max_attempts): a worker that dies loses
     * nothing. Choose $ttr above the longest time a job may take: a job
     * still being worked on when its ttr passes is delivered again.
     * Reserving a job takes its expiry off: it is kept until acked or
     * purged.
     *
     * @param int|float $ttr time-to-run in seconds: more than 0, at most
     *                       315360000, rounded to the millisecond (at least 1 ms)
     * @return ReservedMessage|false the job, or false when none is ready
     * @throws InvalidArgumentException on a bad topic or ttr
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function reserve(string $topic, int|float $ttr): ReservedMessage|false
    {
        $topic = $this->keys->topic($topic);
        return $this->runReserve($topic, Validator::ttrMs($ttr));
    }

    /**
     * reserve(), waiting up to $timeout seconds for a job.
     *
     * It waits with BLMOVE from the ready queue onto itself, which takes
     * nothing (a worker dying mid-wait cannot lose an id, as it could
     * between a BRPOP and the script recording the reservation), then runs
     * reserve.lua; when another worker was quicker, or the ids were stale,
     * it waits again within the same timeout. Timeouts are bPop()'s.
     *
     * @param int|float $ttr     as reserve()
     * @param int|float $timeout seconds, fractions allowed; 0 waits forever
     * @return ReservedMessage|false the job, or false when the timeout passed
     * @throws InvalidArgumentException on a bad topic, ttr or timeout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bReserve(string $topic, int|float $ttr, int|float $timeout = 0): ReservedMessage|false
    {
        $topic = $this->keys->topic($topic);
        $ttrMs = Validator::ttrMs($ttr);
        $timeout = Validator::timeout($timeout);
        $queue = (string) $this->keys->names($topic)->ready;
        return BlockingWait::until($timeout, function (float $wait) use ($queue, $topic, $ttrMs): ReservedMessage|false|null {
            if ($this->connection->blocking('BLMOVE', [$queue, $queue, 'RIGHT', 'RIGHT'], $wait) === null) {
                return null;
            }
            return $this->runReserve($topic, $ttrMs);
        });
    }

    /**
     * Acks finished reservations and reserves up to $n more jobs of a topic,
     * in one call (one round trip; reserve.lua's batch mode): a worker's
     * "done with these, give me the next". The acks come first and act as
     * {@see ack()} does; the jobs are reserved as {@see reserve()} reserves
     * one, in ready order. Does not wait.
     *
     *     [, $jobs] = $client->reserveMany('mail', 60, 1);
     *     // ... run $jobs[0] ...
     *     [$acked, $jobs] = $client->reserveMany('mail', 60, 1, [$jobs[0]]);
     *
     * If the call fails on a lost connection, it may still have run: the
     * acks sent again return false the second time, and jobs it reserved
     * come back after their ttr (at least once).
     *
     * @param int|float                    $ttr  as reserve()
     * @param int                          $n    the most jobs to reserve, 0 (acks only) to 1000
     * @param list<ReservedMessage|string> $acks reservations to end with success first (at
     *                                           most 1000): a ReservedMessage (that
     *                                           reservation), or an id (its current one;
     *                                           of $topic in the per-topic layout, where
     *                                           a ReservedMessage of another topic is
     *                                           acked by a call of its own)
     * @return array{0: list<bool>, 1: list<ReservedMessage>} one flag per ack, in
     *         order (as ack()'s result), and 0 to $n jobs
     * @throws InvalidArgumentException on a bad topic, ttr, n or ack (nothing is sent to Redis)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
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
        $elsewhere = []; // per-topic layout: position in $acks => [id, receipt, topic] of another topic
        foreach (array_values($acks) as $i => $job) {
            if (!$job instanceof ReservedMessage && !\is_string($job) && !\is_int($job)) {
                throw new InvalidArgumentException(sprintf(
                    'acks[%s] must be a ReservedMessage or a job id, got %s',
                    var_export(array_keys($acks)[$i], true),
                    get_debug_type($job)
                ));
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
        $reply = $this->connection->script(...$call);
        [$acked, $jobs] = Replies::reserveBatch($reply, \count($pairs), $n);
        foreach (array_keys($pairs) as $k => $i) {
            $flags[$i] = $acked[$k];
        }
        ksort($flags);
        return [array_values($flags), $jobs];
    }

    /**
     * Ends a reservation with success: the job is deleted.
     *
     * Given the ReservedMessage, it acts on that reservation only (its
     * receipt): a worker that overran its ttr, whose job was meanwhile
     * handed to another worker, gets false and changes nothing. Given an id,
     * it acts on the reservation named by $receipt, or on whichever is
     * current when $receipt is null. An ack after the deadline still counts
     * while the server has not yet taken the job back.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $topic   with an id only: its topic, needed in the
     *                                        per-topic layout (ids are per topic there)
     * @return bool true when the reservation was held (the job is deleted),
     *              false when it was not (already ended, expired and handed
     *              out again, unknown id): nothing changed
     * @throws InvalidArgumentException on a bad id or receipt
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function ack(string|ReservedMessage $job, ?string $receipt = null, ?string $topic = null): bool
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'ack');
        return Replies::ack($this->connection->script(...Calls::ack($this->keys, $id, $receipt, $topic)));
    }

    /**
     * Extends a reservation a worker still needs: its deadline becomes
     * $ttr seconds from now (Redis's clock). The deadline is set, not added
     * to, so a shorter $ttr brings it in. The attempt count does not change:
     * a touch lengthens this attempt, it does not start another. Which
     * reservation: as {@see ack()}. A ReservedMessage is immutable: its
     * $deadline stays the one reserve() gave; the new one is returned.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param int|float              $ttr     as reserve(): more than 0, at most
     *                                        315360000, rounded to the millisecond
     *                                        (at least 1 ms)
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $topic   with an id only: as ack()'s
     * @return float|false the new deadline in Unix seconds (ms precision), or
     *                     false when the reservation was not held (already
     *                     ended, expired and handed out again, unknown id):
     *                     nothing changed
     * @throws InvalidArgumentException on a bad id, receipt or ttr
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function touch(string|ReservedMessage $job, int|float $ttr, ?string $receipt = null, ?string $topic = null): float|false
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'touch');
        $call = Calls::touch($this->keys, $id, $receipt, Validator::ttrMs($ttr), $topic);
        return Replies::touch($this->connection->script(...$call));
    }

    /**
     * Ends a reservation as a failed attempt: the job goes back to the pool,
     * due after $delay seconds, or after its backoff when $delay is null;
     * to its topic's dead letters instead when its attempts reached
     * max_attempts. Which reservation: as {@see ack()}.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param int|float|null         $delay   seconds, 0 to 315360000 (rounded to the
     *                                        millisecond); null: the job's backoff
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $error   why the attempt failed, kept on the job
     *                                        (its first 1000 bytes, shown by dead
     *                                        letters and job lookups) until it is
     *                                        pushed again or acked; null: nothing
     * @param string|null            $topic   with an id only: as ack()'s
     * @return bool true when the reservation was held (the job is scheduled
     *              again or dead), false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id, receipt or delay
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
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
     * Ends a reservation by giving up: the job goes straight to its topic's
     * dead letters (reason "buried"), whatever its attempts, and stays there
     * until requeueDead() or purgeDead(). Which reservation: as {@see ack()}.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $error   why, kept on the job as release()'s
     * @param string|null            $topic   with an id only: as ack()'s
     * @return bool true when the reservation was held (the job is dead),
     *              false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id or receipt
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bury(string|ReservedMessage $job, ?string $receipt = null, ?string $error = null, ?string $topic = null): bool
    {
        [$id, $receipt, $topic] = Calls::reservation($job, $receipt, $this->keys, $topic, 'bury');
        return $this->runRelease($id, $receipt, 'bury', $error, $topic);
    }

    /** reserve.lua for a checked topic and ttr. */
    private function runReserve(string $topic, int $ttrMs): ReservedMessage|false
    {
        return Replies::reserve($this->connection->script(...Calls::reserve($this->keys, $topic, $ttrMs)));
    }

    /** release.lua in "held" mode. */
    private function runRelease(string $id, string $receipt, string $action, ?string $error, ?string $topic): bool
    {
        return Replies::release($this->connection->script(...Calls::release($this->keys, $id, $receipt, $action, $error ?? '', $topic))) !== false;
    }
}
