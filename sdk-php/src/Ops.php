<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;

/**
 * The calls and their replies, without I/O (sdk-rust's `ops`): what each
 * operation sends (a script's name, KEYS and ARGV, built from checked
 * input) and what each reply means (checked against docs/PROTOCOL.md, a
 * reply of another shape being a {@see ProtocolException}). The client only
 * joins these to its {@see Connection}.
 *
 * A call is `[script name, KEYS, ARGV]`, ready for Connection::script(...$call).
 *
 * @internal used by {@see Client}
 */
final class Ops
{
    /** deadLetters() caps its start here: past any list's length, exact in Lua's doubles. */
    private const MAX_LIST_INDEX = 1 << 50;

    private function __construct()
    {
    }

    /**
     * Checks one job and builds push.lua's KEYS and ARGV[1..9] and its
     * traceparent (ARGV[12], "" for none: push_many.lua's tenth value per
     * job; the policy and wake channel are added by {@see push()} or
     * {@see pushMany()}).
     *
     * @return array{0: list<string>, 1: list<string>}
     * @throws InvalidArgumentException
     */
    public static function job(Keys $keys, Message $message, int|float $delay, int|float $readyMaxLifetime): array
    {
        $id = Validator::name('id', $message->id);
        $topic = Validator::topic($message->topic, $keys->isPerTopic());
        $delayMs = Validator::delayMs($delay);
        $lifetimeMs = Validator::lifetimeMs(self::wholeSeconds($readyMaxLifetime));
        // Retry settings not set go as "": push.lua then writes nothing, and
        // the bucket stays exactly Delayer 1.x's.
        $maxAttempts = $message->maxAttempts === null ? '' : (string) Validator::maxAttempts($message->maxAttempts);
        $backoff = $message->backoff;
        $n = $keys->names($topic);
        return [
            self::withOptional([$n->pool, $n->bucket($id)], $n->scheduledCount),
            [
                $id, $topic, $message->body, (string) $delayMs, (string) $lifetimeMs, $maxAttempts,
                $backoff?->kind ?? '', (string) ($backoff?->backoffMs ?? ''), (string) ($backoff?->backoffMaxMs ?? ''),
                Traceparent::check($message->traceparent) ?? '',
            ],
        ];
    }

    /**
     * push.lua for one job of {@see job()}.
     *
     * @param array{0: list<string>, 1: list<string>} $job
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function push(Keys $keys, array $job, bool $ifAbsent): array
    {
        $argv = \array_slice($job[1], 0, 9);
        return [Scripts::PUSH, $job[0], [...$argv, self::policy($ifAbsent), $keys->names($job[1][1])->wake, $job[1][9]]];
    }

    /**
     * push_many.lua's calls for jobs of {@see job()} (KEYS and ARGV as its
     * header states), at most {@see Scripts::PUSH_MANY_MAX_JOBS} jobs per call:
     * in the input's order (classic layout), or grouped by topic, one topic
     * per call (per-topic layout: a call's jobs share its pool and bucket
     * prefix). Each call comes with the indexes in $jobs of its jobs, in the
     * order of its reply's entries.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $jobs
     * @return list<array{0: list<string>, 1: list<string>, 2: list<int>}> KEYS, ARGV and job indexes of each call
     */
    public static function pushMany(Keys $keys, array $jobs, bool $ifAbsent): array
    {
        $groups = [];
        foreach ($jobs as $i => [, $jobArgv]) {
            $groups[$keys->isPerTopic() ? $jobArgv[1] : ''][] = $i;
        }
        $calls = [];
        foreach ($groups as $topic => $indexes) {
            $n = $keys->names($keys->isPerTopic() ? (string) $topic : null);
            foreach (array_chunk($indexes, Scripts::PUSH_MANY_MAX_JOBS) as $chunk) {
                $argv = [$n->bucketPrefix, self::policy($ifAbsent), $n->wake];
                foreach ($chunk as $i) {
                    array_push($argv, ...$jobs[$i][1]);
                }
                $calls[] = [self::withOptional([$n->pool], $n->scheduledCount), $argv, $chunk];
            }
        }
        return $calls;
    }

    /**
     * push_many.lua's reply to one call: one entry per job.
     *
     * @param array{0: list<string>, 1: list<string>} $call the call's KEYS and ARGV
     * @return list<mixed>
     * @throws ProtocolException
     */
    public static function pushManyEntries(mixed $reply, array $call): array
    {
        $expected = intdiv(\count($call[1]) - Scripts::PUSH_MANY_HEAD, Scripts::PUSH_MANY_STRIDE);
        if (!\is_array($reply) || \count($reply) !== $expected) {
            throw new ProtocolException('unexpected reply from push_many.lua: ' . get_debug_type($reply));
        }
        return array_values($reply);
    }

    /**
     * pop.lua for a checked topic.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function pop(Keys $keys, string $topic): array
    {
        $n = $keys->names($topic);
        return [Scripts::POP, [(string) $n->ready, $n->malformed, $n->pool, $n->reserved], [$n->bucketPrefix]];
    }

    /**
     * The id a BRPOP handed out.
     *
     * @throws ProtocolException
     */
    public static function poppedId(mixed $reply): string
    {
        if (!\is_array($reply) || \count($reply) !== 2 || !\is_string($reply[1] ?? null)) {
            throw new ProtocolException('unexpected reply from BRPOP: ' . get_debug_type($reply));
        }
        return $reply[1];
    }

    /**
     * take.lua for the id BRPOP handed out of $topic's ready list.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function take(Keys $keys, string $id, ?string $topic = null): array
    {
        $n = $keys->names($keys->isPerTopic() ? $topic : null);
        return [Scripts::TAKE, [$n->bucket($id), $n->malformed, $n->pool, $n->reserved], [$id]];
    }

    /**
     * pop.lua's and take.lua's [id, topic, body, traceparent] (or nil) as a
     * Message (or false).
     *
     * @throws ProtocolException
     */
    public static function message(mixed $reply, string $script): Message|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_array($reply) || \count($reply) !== 4) {
            throw new ProtocolException("unexpected reply from {$script}.lua: " . get_debug_type($reply));
        }
        [$id, $topic, $body] = array_map(static fn ($v): string => \is_string($v) ? $v : (string) $v, \array_slice($reply, 0, 3));
        $message = Message::create($id, $topic, $body);
        $message->traceparent = Traceparent::fromRedis($id, $reply[3]);
        return $message;
    }

    /**
     * remove.lua for a checked id (and its topic, of {@see callTopic()}).
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function remove(Keys $keys, string $id, ?string $topic = null): array
    {
        $n = self::idNames($keys, $topic);
        return [Scripts::REMOVE, self::withOptional([$n->pool, $n->bucket($id)], $n->scheduledCount), [$id]];
    }

    /**
     * The topic of an id-only call (remove, reschedule, ack, touch, release,
     * bury by id): checked when given; required in the per-topic layout,
     * where ids are per topic. In the classic layout it is checked and
     * otherwise not needed (ids are global).
     *
     * @param string $usage the call with its topic, for the message: "remove($id, $topic)"
     * @throws InvalidArgumentException
     */
    public static function callTopic(Keys $keys, mixed $topic, string $call, string $usage): ?string
    {
        if ($topic !== null) {
            return Validator::topic($topic, $keys->isPerTopic());
        }
        if ($keys->isPerTopic()) {
            throw new InvalidArgumentException("{$call}() needs the topic in the per-topic layout: {$usage}");
        }
        return null;
    }

    /**
     * A script's 1 or 0 (remove.lua, ack.lua) as a bool.
     *
     * @throws ProtocolException
     */
    public static function flag(mixed $reply, string $script): bool
    {
        if ($reply !== 0 && $reply !== 1) {
            throw new ProtocolException("unexpected reply from {$script}.lua: " . get_debug_type($reply));
        }
        return $reply === 1;
    }

    /**
     * reserve.lua for a checked topic and ttr.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reserve(Keys $keys, string $topic, int $ttrMs): array
    {
        $n = $keys->names($topic);
        return [
            Scripts::RESERVE,
            [(string) $n->ready, $n->reserved, $n->malformed, $n->receiptSeq, $n->pool, $n->outcomes],
            [$n->bucketPrefix, (string) $ttrMs],
        ];
    }

    /**
     * reserve.lua in batch mode: ack the reservations of {@see reservation()}
     * first, then reserve up to $n jobs of a checked topic.
     *
     * @param list<array{0: string, 1: string}> $acks (id, receipt) pairs
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reserveMany(Keys $keys, string $topic, int $ttrMs, int $n, array $acks): array
    {
        [$script, $keyList, $argv] = self::reserve($keys, $topic, $ttrMs);
        $argv[] = (string) $n;
        foreach ($acks as [$id, $receipt]) {
            array_push($argv, $id, $receipt);
        }
        return [$script, $keyList, $argv];
    }

    /**
     * reserve.lua's batch reply {acks, jobs}: one flag per ack sent, and
     * at most $n jobs.
     *
     * @return array{0: list<bool>, 1: list<ReservedMessage>}
     * @throws ProtocolException
     */
    public static function reservedMany(mixed $reply, int $acks, int $n): array
    {
        if (!\is_array($reply) || \count($reply) !== 2 || !\is_array($reply[0] ?? null) || !\is_array($reply[1] ?? null)
            || \count($reply[0]) !== $acks || \count($reply[1]) > $n
        ) {
            throw new ProtocolException('unexpected reply from reserve.lua (batch): ' . get_debug_type($reply));
        }
        $flags = [];
        foreach ($reply[0] as $flag) {
            $flags[] = self::flag($flag, Scripts::RESERVE);
        }
        $jobs = [];
        foreach ($reply[1] as $job) {
            $jobs[] = self::reserved($job) ?: throw new ProtocolException('unexpected nil job from reserve.lua (batch)');
        }
        return [$flags, $jobs];
    }

    /**
     * reserve.lua's reply as a ReservedMessage (false for nil).
     *
     * @throws ProtocolException
     */
    public static function reserved(mixed $reply): ReservedMessage|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_array($reply) || \count($reply) !== 8 || !\is_int($reply[3]) || !\is_int($reply[4])) {
            throw new ProtocolException('unexpected reply from reserve.lua: ' . get_debug_type($reply));
        }
        [$id, $topic, $body, $attempts, $maxAttempts, $receipt, $deadline, $traceparent] = $reply;
        return new ReservedMessage(
            (string) $id,
            (string) $topic,
            (string) $body,
            $attempts,
            $maxAttempts,
            (string) $receipt,
            self::seconds($deadline, Scripts::RESERVE),
            Traceparent::fromRedis((string) $id, $traceparent),
        );
    }

    /**
     * The id and receipt that ack / touch / release / bury send: a
     * ReservedMessage's own (its id came from Redis and is not checked
     * again), or a checked id with the receipt given, "" for the current
     * reservation.
     *
     * With $keys and $call, also the topic: the ReservedMessage's own, or
     * $topic with an id ({@see callTopic()}: required in the per-topic
     * layout).
     *
     * @return array{0: string, 1: string, 2: string|null}
     * @throws InvalidArgumentException
     */
    public static function reservation(
        string|int|ReservedMessage $job,
        ?string $receipt,
        ?Keys $keys = null,
        ?string $topic = null,
        string $call = 'ack',
    ): array {
        if ($job instanceof ReservedMessage) {
            if ($receipt !== null) {
                throw new InvalidArgumentException('a ReservedMessage carries its receipt: pass a receipt only with an id');
            }
            if ($topic !== null) {
                throw new InvalidArgumentException('a ReservedMessage carries its topic: pass a topic only with an id');
            }
            return [$job->id, $job->receipt, $job->topic];
        }
        $id = Validator::name('id', $job);
        if ($receipt === '') {
            throw new InvalidArgumentException('receipt must not be empty: pass null to act on the current reservation');
        }
        $topic = $keys === null ? $topic : self::callTopic(
            $keys,
            $topic,
            $call,
            "pass the ReservedMessage, or {$call}(\$id, ..., topic: \$topic)"
        );
        return [$id, $receipt ?? '', $topic];
    }

    /**
     * ack.lua for a reservation of {@see reservation()}.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function ack(Keys $keys, string $id, string $receipt, ?string $topic = null): array
    {
        $n = self::idNames($keys, $topic);
        return [Scripts::ACK, [$n->reserved, $n->bucket($id), $n->pool, $n->outcomes], [$id, $receipt]];
    }

    /**
     * touch.lua for a reservation of {@see reservation()} and a checked ttr.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function touch(Keys $keys, string $id, string $receipt, int $ttrMs, ?string $topic = null): array
    {
        $n = self::idNames($keys, $topic);
        return [Scripts::TOUCH, [$n->reserved, $n->bucket($id), $n->pool], [$id, $receipt, (string) $ttrMs]];
    }

    /**
     * release.lua in "held" mode: $action is a delay in ms, "backoff" or
     * "bury"; $error why the attempt failed ("" for nothing to say), sent
     * cut to the bytes the script keeps.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function release(
        Keys $keys,
        string $id,
        string $receipt,
        string $action,
        string $error = '',
        ?string $topic = null,
    ): array {
        $n = self::idNames($keys, $topic);
        return [
            Scripts::RELEASE,
            // KEYS[4]: the counts (classic), or the topic's dead list (per topic, ARGV[2] "")
            [$n->reserved, $n->pool, $n->malformed, $n->scheduledCount ?? (string) $n->dead, $n->outcomes],
            [
                $n->bucketPrefix, $n->deadPrefix, $action, 'held', $id, $receipt, $n->wake,
                substr($error, 0, Scripts::ERROR_MAX_BYTES),
            ],
        ];
    }

    /**
     * release.lua's reply: true when the reservation was held.
     *
     * @throws ProtocolException
     */
    public static function released(mixed $reply): bool
    {
        return self::releasedTime($reply) !== false;
    }

    /**
     * release.lua's reply as it came: the new due time "s.mmm", "dead", or
     * false when the reservation was not held.
     *
     * @throws ProtocolException
     */
    public static function releasedTime(mixed $reply): string|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_string($reply) || ($reply !== 'dead' && !is_numeric($reply))) {
            throw new ProtocolException('unexpected reply from release.lua: ' . get_debug_type($reply));
        }
        return $reply;
    }

    /**
     * reschedule.lua for a checked id and delay.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reschedule(Keys $keys, string $id, int $delayMs, ?string $topic = null): array
    {
        $n = self::idNames($keys, $topic);
        return [Scripts::RESCHEDULE, [$n->pool, $n->bucket($id)], [$id, (string) $delayMs, $n->wake]];
    }

    /**
     * A script's "s.mmm" time or nil (touch.lua, reschedule.lua): Unix
     * seconds, or false.
     *
     * @throws ProtocolException
     */
    public static function timeOrFalse(mixed $reply, string $script): float|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        return self::seconds($reply, $script);
    }

    /**
     * dead.lua's listing of a checked topic and window.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function deadList(Keys $keys, string $topic, int $start, int $count): array
    {
        // Beyond any list's length either way; keeps start + count exact in
        // Lua's doubles.
        $start = min($start, self::MAX_LIST_INDEX);
        $n = $keys->names($topic);
        return [
            Scripts::DEAD,
            self::withOptional([(string) $n->dead, $n->pool], $n->scheduledCount),
            [$n->bucketPrefix, $topic, 'list', (string) $start, (string) $count],
        ];
    }

    /**
     * dead.lua's listing as DeadLetters.
     *
     * @return list<DeadLetter>
     * @throws ProtocolException
     */
    public static function deadLetters(mixed $reply): array
    {
        if (!\is_array($reply)) {
            throw new ProtocolException('unexpected reply from dead.lua: ' . get_debug_type($reply));
        }
        $letters = [];
        foreach ($reply as $entry) {
            if (!\is_array($entry) || \count($entry) !== 7 || !\is_int($entry[3])) {
                throw new ProtocolException('unexpected entry from dead.lua: ' . get_debug_type($entry));
            }
            [$id, $topicOf, $body, $attempts, $reason, $deadAt, $lastError] = $entry;
            $letters[] = new DeadLetter(
                (string) $id,
                (string) $topicOf,
                (string) $body,
                $attempts,
                (string) $reason,
                // dead_at is written with dead_reason; a hand-edited bucket without it reads as 0
                \is_string($deadAt) && is_numeric($deadAt) ? (float) $deadAt : 0.0,
                \is_string($lastError) && $lastError !== '' ? $lastError : null,
            );
        }
        return $letters;
    }

    /**
     * dead.lua's requeue or purge: of the given ids (at most
     * {@see Scripts::DEAD_MAX_PER_CALL}), or with $ids null of that many
     * from the oldest end of the list.
     *
     * @param 'requeue'|'purge' $action
     * @param list<string>|null $ids checked ids
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function deadAction(Keys $keys, string $topic, string $action, ?array $ids): array
    {
        $n = $keys->names($topic);
        $argv = [$n->bucketPrefix, $topic, $action];
        $argv = $ids === null
            ? [...$argv, (string) Scripts::DEAD_MAX_PER_CALL]
            : [...$argv, (string) \count($ids), ...$ids];
        return [Scripts::DEAD, self::withOptional([(string) $n->dead, $n->pool], $n->scheduledCount), $argv];
    }

    /**
     * dead.lua's [done, taken] of a requeue or purge.
     *
     * @return array{0: int, 1: int}
     * @throws ProtocolException
     */
    public static function deadCounts(mixed $reply): array
    {
        if (!\is_array($reply) || \count($reply) !== 2 || !\is_int($reply[0]) || !\is_int($reply[1])) {
            throw new ProtocolException('unexpected reply from dead.lua: ' . get_debug_type($reply));
        }
        return [$reply[0], $reply[1]];
    }

    /**
     * A script's "s.mmm" time as Unix seconds.
     *
     * @throws ProtocolException
     */
    public static function seconds(mixed $time, string $script): float
    {
        if (!\is_string($time) || !is_numeric($time)) {
            throw new ProtocolException("unexpected time from {$script}.lua: " . get_debug_type($time));
        }
        return (float) $time;
    }

    /**
     * The index write after a per-topic call that scheduled or reserved
     * (docs/PROTOCOL.md, "The index write"): ZADD <prefix>due LT CH <time>
     * <topic>, and for pushes SADD <prefix>topics <topic>; sent as one
     * pipeline. $time is the call's earliest time as the script answered
     * it ("s.mmm"), or "0" after a requeue.
     *
     * @return list<array{0: string, 1: list<string>}> commands and their arguments
     */
    public static function indexWrite(Keys $keys, string $topic, string $time, bool $pushed): array
    {
        $commands = [['ZADD', [$keys->due(), 'LT', 'CH', $time, $topic]]];
        if ($pushed) {
            $commands[] = ['SADD', [$keys->topics(), $topic]];
        }
        return $commands;
    }

    /**
     * How much earlier than its due time (ms) a per-topic push's index
     * write sent with the script is: the client's and Redis's clocks may
     * disagree by this much before a push costs a second round trip.
     */
    public const CLOCK_MARGIN_MS = 100;

    /** {@see pushFollowUp()}: the index write again, with the answered due time. */
    public const WRITE_AGAIN = 'write';

    /** {@see pushFollowUp()}: only the wake message, with the answered due time. */
    public const WAKE = 'wake';

    /**
     * The time of a per-topic push's index write sent with the script
     * (PROTOCOL.md, "push sends its index write with the script"): this
     * machine's clock plus the delay, {@see CLOCK_MARGIN_MS} early, "s.mmm"
     * like the scripts' times.
     *
     * @param float $now Unix seconds (microtime(true))
     */
    public static function pushEstimate(int $delayMs, float $now): string
    {
        $ms = (int) floor($now * 1000) + $delayMs - self::CLOCK_MARGIN_MS;
        return sprintf('%d.%03d', intdiv($ms, 1000), $ms % 1000);
    }

    /**
     * What a per-topic push does once push.lua answered $answered, after
     * sending its index write with $early: {@see WRITE_AGAIN} when the
     * estimate came out later (the clocks disagree by more than the margin),
     * else {@see WAKE} when that write lowered the index, or may have (the
     * pipeline was sent again after NOSCRIPT, $resent), else null.
     */
    public static function pushFollowUp(string $early, string $answered, bool $lowered, bool $resent): ?string
    {
        if ((int) round((float) $early * 1000) > (int) round((float) $answered * 1000)) {
            return self::WRITE_AGAIN;
        }
        return $lowered || $resent ? self::WAKE : null;
    }

    /**
     * Whether the index write lowered the topic's time (ZADD LT CH answered
     * 1): only then is the time published on the wake channel. Null (ZADD
     * refused) did not.
     *
     * @param list<mixed> $replies
     * @throws ProtocolException
     */
    public static function indexLowered(array $replies): bool
    {
        $zadd = $replies[0] ?? null;
        if ($zadd === null) { // refused: a hint (TopicIndex::heard())
            return false;
        }
        if ($zadd !== 0 && $zadd !== 1) {
            throw new ProtocolException('unexpected reply from ZADD LT CH: ' . get_debug_type($zadd));
        }
        return $zadd === 1;
    }

    /**
     * PUBLISH <prefix>wake <time>, after a lowered index (a sleeping server
     * wakes for it).
     *
     * @return list<array{0: string, 1: list<string>}>
     */
    public static function wake(Keys $keys, string $time): array
    {
        return [['PUBLISH', [$keys->wake(), $time]]];
    }

    /**
     * The earliest of some "s.mmm" times, as given (compared as numbers).
     *
     * @param list<string> $times not empty
     */
    public static function earliest(array $times): string
    {
        $best = $times[0];
        foreach ($times as $time) {
            if ((float) $time < (float) $best) {
                $best = $time;
            }
        }
        return $best;
    }

    /**
     * The names of an id-only call: the topic's in the per-topic layout, the
     * shared ones in the classic layout (whose ids are global).
     */
    private static function idNames(Keys $keys, ?string $topic): Names
    {
        return $keys->names($keys->isPerTopic() ? $topic : null);
    }

    /**
     * KEYS with an optional last key (the scheduled counts, absent in the
     * per-topic layout).
     *
     * @param list<string> $keys
     * @return list<string>
     */
    private static function withOptional(array $keys, ?string $optional): array
    {
        if ($optional !== null) {
            $keys[] = $optional;
        }
        return $keys;
    }

    private static function policy(bool $ifAbsent): string
    {
        return $ifAbsent ? Scripts::IF_ABSENT : Scripts::REPLACE;
    }

    /**
     * A whole number of seconds given as int or integral float.
     *
     * @throws InvalidArgumentException
     */
    private static function wholeSeconds(int|float $seconds): int
    {
        if (\is_float($seconds)) {
            if (!is_finite($seconds) || floor($seconds) !== $seconds || abs($seconds) > PHP_INT_MAX / 1000) {
                throw new InvalidArgumentException(sprintf(
                    'readyMaxLifetime must be a whole number of seconds, got %s',
                    var_export($seconds, true)
                ));
            }
            return (int) $seconds;
        }
        return $seconds;
    }
}
