<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ProtocolException;

/**
 * What each script's reply means: one decoder per script, named after it (a
 * _topic script's is its classic one's). A reply of another shape raises
 * {@see ProtocolException}: Redis's data is input like any other. No I/O.
 *
 * @internal used by {@see Client}
 */
final class Replies
{
    /** push.lua: the due time written, or under the "absent" policy the job holding the id. */
    public static function push(mixed $reply, string $id, string $script = Scripts::PUSH): float|Taken
    {
        if (\is_string($reply) && is_numeric($reply)) {
            return (float) $reply;
        }
        if (\is_array($reply) && \count($reply) === 2 && \is_string($reply[0] ?? null)
            && \is_string($reply[1] ?? null) && ($reply[1] === '' || is_numeric($reply[1]))
        ) {
            return new Taken($id, $reply[0], $reply[1] === '' ? null : (float) $reply[1]);
        }
        throw self::bad($script, $reply);
    }

    /**
     * push_many.lua: one push() entry per job of the call.
     *
     * @param list<string> $ids
     * @return list<float|Taken>
     */
    public static function pushMany(mixed $reply, array $ids): array
    {
        if (!\is_array($reply) || \count($reply) !== \count($ids)) {
            throw self::bad(Scripts::PUSH_MANY, $reply);
        }
        return array_map(static fn (mixed $e, string $id) => self::push($e, $id, Scripts::PUSH_MANY), array_values($reply), $ids);
    }

    /**
     * The wait instruction ["paused", recheck_ms, gate] a claim (pop, take, reserve) answers while its
     * topic is paused: [gate, recheck seconds] for {@see BlockingWait}; null for any other reply.
     *
     * @return array{0: string, 1: float}|null
     */
    public static function wait(mixed $reply): ?array
    {
        if (!\is_array($reply) || \count($reply) !== 3 || ($reply[0] ?? null) !== 'paused') {
            return null;
        }
        if (!\is_int($reply[1]) || $reply[1] < 1 || !\is_string($reply[2]) || $reply[2] === '') {
            throw new ProtocolException('unexpected wait instruction from Redis: ' . get_debug_type($reply[2] ?? null));
        }
        return [$reply[2], $reply[1] / 1e3];
    }

    /** pop.lua: [id, topic, body, traceparent] as a Message, false for nil or a wait instruction. */
    public static function pop(mixed $reply, string $script = Scripts::POP): Message|false
    {
        if ($reply === false || $reply === null || self::wait($reply) !== null) {
            return false;
        }
        if (!\is_array($reply) || \count($reply) !== 4) {
            throw self::bad($script, $reply);
        }
        [$id, $topic, $body] = array_map(static fn ($v): string => \is_string($v) ? $v : (string) $v, \array_slice($reply, 0, 3));
        $message = Message::create($id, $topic, $body);
        $message->traceparent = Traceparent::fromRedis($id, $reply[3]);
        return $message;
    }

    /** take.lua: as pop.lua's. */
    public static function take(mixed $reply): Message|false
    {
        return self::pop($reply, Scripts::TAKE);
    }

    /** BRPOP's [list, id]: the id. */
    public static function brpop(mixed $reply): string
    {
        if (!\is_array($reply) || \count($reply) !== 2 || !\is_string($reply[1] ?? null)) {
            throw new ProtocolException('unexpected reply from BRPOP: ' . get_debug_type($reply));
        }
        return $reply[1];
    }

    /** remove.lua: 1 (removed) or 0. */
    public static function remove(mixed $reply, string $script = Scripts::REMOVE): bool
    {
        if ($reply !== 0 && $reply !== 1) {
            throw self::bad($script, $reply);
        }
        return $reply === 1;
    }

    /** ack.lua: 1 (held, the job is deleted) or 0. */
    public static function ack(mixed $reply): bool
    {
        return self::remove($reply, Scripts::ACK);
    }

    /** reserve.lua (one job): a ReservedMessage, false for nil or a wait instruction. */
    public static function reserve(mixed $reply): ReservedMessage|false
    {
        if ($reply === false || $reply === null || self::wait($reply) !== null) {
            return false;
        }
        if (!\is_array($reply) || \count($reply) !== 8 || !\is_int($reply[3]) || !\is_int($reply[4])) {
            throw self::bad(Scripts::RESERVE, $reply);
        }
        [$id, $topic, $body, $attempts, $maxAttempts, $receipt, $deadline, $traceparent] = $reply;
        return new ReservedMessage((string) $id, (string) $topic, (string) $body, $attempts, $maxAttempts, (string) $receipt,
            self::seconds($deadline, Scripts::RESERVE), Traceparent::fromRedis((string) $id, $traceparent));
    }

    /**
     * reserve.lua in batch mode: [acks, jobs], or while paused [acks, [], wait instruction] (no jobs).
     *
     * @return array{0: list<bool>, 1: list<ReservedMessage>} a flag per ack sent, at most $n jobs
     */
    public static function reserveBatch(mixed $reply, int $acks, int $n): array
    {
        $paused = \is_array($reply) && \count($reply) === 3 && ($reply[1] ?? null) === [] && self::wait($reply[2] ?? null) !== null;
        if (!\is_array($reply) || (\count($reply) !== 2 && !$paused) || !\is_array($reply[0] ?? null) || !\is_array($reply[1] ?? null)
            || \count($reply[0]) !== $acks || \count($reply[1]) > $n
        ) {
            throw self::bad(Scripts::RESERVE . ' (batch)', $reply);
        }
        return [
            array_map(static fn (mixed $flag): bool => self::remove($flag, Scripts::RESERVE), array_values($reply[0])),
            array_map(static fn (mixed $job): ReservedMessage => self::reserve($job)
                ?: throw new ProtocolException('unexpected nil job from reserve.lua (batch)'), array_values($reply[1])),
        ];
    }

    /** touch.lua: the new deadline in Unix seconds, false when not held. */
    public static function touch(mixed $reply, string $script = Scripts::TOUCH): float|false
    {
        return $reply === false || $reply === null ? false : self::seconds($reply, $script);
    }

    /** reschedule.lua: the new due time in Unix seconds, false when the job is not waiting. */
    public static function reschedule(mixed $reply): float|false
    {
        return self::touch($reply, Scripts::RESCHEDULE);
    }

    /** release.lua ("held"): the new due time "s.mmm" or "dead", false when not held. */
    public static function release(mixed $reply): string|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_string($reply) || ($reply !== 'dead' && !is_numeric($reply))) {
            throw self::bad(Scripts::RELEASE, $reply);
        }
        return $reply;
    }

    /** @return list<DeadLetter> dead.lua's listing */
    public static function deadList(mixed $reply): array
    {
        if (!\is_array($reply)) {
            throw self::bad(Scripts::DEAD, $reply);
        }
        $letters = [];
        foreach ($reply as $entry) {
            if (!\is_array($entry) || \count($entry) !== 7 || !\is_int($entry[3])) {
                throw new ProtocolException('unexpected entry from dead.lua: ' . get_debug_type($entry));
            }
            [$id, $topic, $body, $attempts, $reason, $deadAt, $lastError] = $entry;
            // dead_at is written with dead_reason; a hand-edited bucket without it reads as 0
            $letters[] = new DeadLetter((string) $id, (string) $topic, (string) $body, $attempts, (string) $reason,
                \is_string($deadAt) && is_numeric($deadAt) ? (float) $deadAt : 0.0, \is_string($lastError) && $lastError !== '' ? $lastError : null);
        }
        return $letters;
    }

    /** @return array{0: int, 1: int} dead.lua's requeue or purge: [done, taken] */
    public static function deadAction(mixed $reply): array
    {
        if (!\is_array($reply) || \count($reply) !== 2 || !\is_int($reply[0]) || !\is_int($reply[1])) {
            throw self::bad(Scripts::DEAD, $reply);
        }
        return [$reply[0], $reply[1]];
    }

    /** lookup.lua: where job $id is, and what it carries. */
    public static function lookup(mixed $reply, string $id): JobInfo
    {
        if (!\is_array($reply) || \count($reply) !== 10) {
            throw self::bad(Scripts::LOOKUP, $reply);
        }
        $reply = array_values($reply);
        $f = array_map(static fn (mixed $v): ?string => self::text($v), $reply);
        $state = $f[0] ?? '';
        if (!\in_array($state, JobInfo::STATES, true)) {
            throw new ProtocolException("lookup.lua: unknown state {$state}");
        }
        $time = self::time($f[5]);
        $at = static fn (string $when): ?float => $state === $when ? $time : null;
        return new JobInfo($id, $state, $f[1], self::count($f[2]), self::count($f[3]), self::count($f[4]),
            $at('scheduled'), $at('reserved'), $at('dead'), $f[6], $f[7], Traceparent::fromRedis($id, $reply[8]), $f[9] ?? '');
    }

    /** @return array{0: int|null, 1: list<array{0: string, 1: float|null}>} list.lua's {next_rank, id, score, ...} */
    public static function list(mixed $reply): array
    {
        if (!\is_array($reply) || \count($reply) % 2 !== 1) {
            throw self::bad(Scripts::LIST, $reply);
        }
        $reply = array_values($reply);
        $pairs = [];
        for ($i = 1; $i < \count($reply); $i += 2) {
            $pairs[] = [self::text($reply[$i]) ?? '', self::time(self::text($reply[$i + 1]))];
        }
        return [self::count(self::text($reply[0])), $pairs];
    }

    /** stats.lua's {pool, reserved, known, {topic, scheduled, ready, reserved, dead, paused_since, held, per_second, burst}, ...}. */
    public static function stats(mixed $reply): Stats
    {
        if (!\is_array($reply) || \count($reply) < 3) {
            throw self::bad(Scripts::STATS, $reply);
        }
        $reply = array_values($reply);
        $known = self::int($reply[2]) === 1;
        $topics = [];
        foreach (\array_slice($reply, 3) as $entry) {
            if (!\is_array($entry) || \count($entry) !== 9) {
                throw new ProtocolException('unexpected topic entry from stats.lua: ' . get_debug_type($entry));
            }
            [$topic, $scheduled, $ready, $reserved, $dead, $pausedSince, $held, $perSecond, $burst] = array_values($entry);
            [$paused, $since] = self::pausedSince($pausedSince);
            $topics[] = new TopicStats(self::text($topic) ?? '', self::int($scheduled), self::int($ready),
                $known ? self::int($reserved) : null, self::int($dead), $paused, $since, self::int($held),
                self::rateLimit($perSecond, $burst));
        }
        return new Stats(self::int($reply[0]), self::int($reply[1]), $topics);
    }

    /**
     * A flow hash's `per_second` and `burst` (flow.lua, stats.lua, or HMGET in the per-topic layout) as a limit:
     * null when there is none ("", nil), and also when either does not read as one (a hand-edited hash: Redis's
     * data is input, and the numbers are for people to read, so that is no reason to fail the whole call).
     */
    public static function rateLimit(mixed $perSecond, mixed $burst): ?RateLimit
    {
        if (\is_int($perSecond)) {
            $perSecond = (string) $perSecond;
        }
        if (\is_int($burst)) {
            $burst = (string) $burst;
        }
        if (!\is_string($perSecond) || !\is_string($burst) || !is_numeric($perSecond) || !ctype_digit($burst)) {
            return null;
        }
        $rate = (float) $perSecond;
        $size = filter_var($burst, FILTER_VALIDATE_INT, ['options' => ['min_range' => 1]]);
        return is_finite($rate) && $rate > 0 && \is_int($size) ? new RateLimit($rate, $size) : null;
    }

    /**
     * A flow hash's `paused` as stats reads it: [paused, since]. "" (or nil): running; a time "s.mmm":
     * paused since then; "?" (stats.lua: a flow hash of the wrong type) or any other value: paused, since unknown.
     *
     * @return array{0: bool, 1: float|null}
     */
    public static function pausedSince(mixed $value): array
    {
        $value = self::text($value);
        if ($value === null) {
            return [false, null];
        }
        $since = is_numeric($value) ? (float) $value : NAN;
        return [true, is_finite($since) ? $since : null];
    }

    /** flow.lua's [paused_since ("s.mmm" or ""), changed (0/1), now ("s.mmm"), held, per_second, burst ("" = none)]. */
    public static function flow(mixed $reply): FlowState
    {
        if (!\is_array($reply) || \count($reply) !== 6) {
            throw self::bad(Scripts::FLOW, $reply);
        }
        [$since, $changed, $now, $held, $perSecond, $burst] = array_values($reply);
        if (!\is_string($since) || ($since !== '' && !is_numeric($since)) || ($changed !== 0 && $changed !== 1)
            || !\is_int($held) || $held < 0
        ) {
            throw self::bad(Scripts::FLOW, $reply);
        }
        return new FlowState($since === '' ? null : (float) $since, $held, $changed === 1, self::seconds($now, Scripts::FLOW),
            self::rateLimit($perSecond, $burst));
    }

    /** A script's "s.mmm" time as Unix seconds. */
    public static function seconds(mixed $time, string $script): float
    {
        if (!\is_string($time) || !is_numeric($time)) {
            throw new ProtocolException("unexpected time from {$script}.lua: " . get_debug_type($time));
        }
        return (float) $time;
    }

    /** A reply's string; null when empty (the scripts' "not known"). */
    public static function text(mixed $value): ?string
    {
        if (\is_int($value)) {
            return (string) $value;
        }
        if ($value === false || $value === null || $value === '') {
            return null;
        }
        if (!\is_string($value)) {
            throw new ProtocolException('expected a string from Redis, got ' . get_debug_type($value));
        }
        return $value;
    }

    /** A count (a non-negative integer) from Redis. */
    public static function int(mixed $value): int
    {
        if (!\is_int($value) || $value < 0) {
            throw new ProtocolException('expected a count from Redis, got ' . get_debug_type($value));
        }
        return $value;
    }

    private static function count(?string $value): ?int
    {
        if ($value !== null && !ctype_digit($value)) {
            throw new ProtocolException("expected a count from Redis, got {$value}");
        }
        return $value === null ? null : (int) $value;
    }

    private static function time(?string $value): ?float
    {
        if ($value !== null && !is_numeric($value)) {
            throw new ProtocolException("expected a time in Unix seconds, got {$value}");
        }
        return $value === null ? null : round((float) $value, 3);
    }

    private static function bad(string $script, mixed $reply): ProtocolException
    {
        return new ProtocolException("unexpected reply from {$script}.lua: " . get_debug_type($reply));
    }
}
