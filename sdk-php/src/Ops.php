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
     * Checks one job and builds push.lua's KEYS and ARGV[1..9] (the job; the
     * policy and wake channel are added by {@see push()} or {@see pushMany()}).
     *
     * @return array{0: list<string>, 1: list<string>}
     * @throws InvalidArgumentException
     */
    public static function job(Keys $keys, Message $message, int|float $delay, int|float $readyMaxLifetime): array
    {
        $id = Validator::name('id', $message->id);
        $topic = Validator::name('topic', $message->topic);
        $delayMs = Validator::delayMs($delay);
        $lifetimeMs = Validator::lifetimeMs(self::wholeSeconds($readyMaxLifetime));
        // Retry settings not set go as "": push.lua then writes nothing, and
        // the bucket stays exactly Delayer 1.x's.
        $maxAttempts = $message->maxAttempts === null ? '' : (string) Validator::maxAttempts($message->maxAttempts);
        $backoff = $message->backoff;
        return [
            [$keys->pool(), $keys->bucket($id), $keys->scheduledCount()],
            [
                $id, $topic, $message->body, (string) $delayMs, (string) $lifetimeMs, $maxAttempts,
                $backoff?->kind ?? '', (string) ($backoff?->backoffMs ?? ''), (string) ($backoff?->backoffMaxMs ?? ''),
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
        return [Scripts::PUSH, $job[0], [...$job[1], self::policy($ifAbsent), $keys->wake()]];
    }

    /**
     * push_many.lua's calls for jobs of {@see job()} (KEYS and ARGV as its
     * header states), at most {@see Scripts::PUSH_MANY_MAX_JOBS} jobs per call.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $jobs
     * @return list<array{0: list<string>, 1: list<string>}> KEYS and ARGV of each call
     */
    public static function pushMany(Keys $keys, array $jobs, bool $ifAbsent): array
    {
        $calls = [];
        foreach (array_chunk($jobs, Scripts::PUSH_MANY_MAX_JOBS) as $chunk) {
            $argv = [$keys->bucketPrefix(), self::policy($ifAbsent), $keys->wake()];
            foreach ($chunk as [, $jobArgv]) {
                array_push($argv, ...$jobArgv);
            }
            $calls[] = [[$keys->pool(), $keys->scheduledCount()], $argv];
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
        return [
            Scripts::POP,
            [$keys->readyQueue($topic), $keys->malformed(), $keys->pool(), $keys->reserved()],
            [$keys->bucketPrefix()],
        ];
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
     * take.lua for the id BRPOP handed out.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function take(Keys $keys, string $id): array
    {
        return [Scripts::TAKE, [$keys->bucket($id), $keys->malformed(), $keys->pool(), $keys->reserved()], [$id]];
    }

    /**
     * pop.lua's and take.lua's [id, topic, body] (or nil) as a Message (or false).
     *
     * @throws ProtocolException
     */
    public static function message(mixed $reply, string $script): Message|false
    {
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_array($reply) || \count($reply) !== 3) {
            throw new ProtocolException("unexpected reply from {$script}.lua: " . get_debug_type($reply));
        }
        [$id, $topic, $body] = array_map(static fn ($v): string => \is_string($v) ? $v : (string) $v, $reply);
        return Message::create($id, $topic, $body);
    }

    /**
     * remove.lua for a checked id.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function remove(Keys $keys, string $id): array
    {
        return [Scripts::REMOVE, [$keys->pool(), $keys->bucket($id), $keys->scheduledCount()], [$id]];
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
        return [
            Scripts::RESERVE,
            [$keys->readyQueue($topic), $keys->reserved(), $keys->malformed(), $keys->receiptSeq(), $keys->pool()],
            [$keys->bucketPrefix(), (string) $ttrMs],
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
        if (!\is_array($reply) || \count($reply) !== 7 || !\is_int($reply[3]) || !\is_int($reply[4])) {
            throw new ProtocolException('unexpected reply from reserve.lua: ' . get_debug_type($reply));
        }
        [$id, $topic, $body, $attempts, $maxAttempts, $receipt, $deadline] = $reply;
        return new ReservedMessage(
            (string) $id,
            (string) $topic,
            (string) $body,
            $attempts,
            $maxAttempts,
            (string) $receipt,
            self::seconds($deadline, Scripts::RESERVE)
        );
    }

    /**
     * The id and receipt that ack / touch / release / bury send: a
     * ReservedMessage's own (its id came from Redis and is not checked
     * again), or a checked id with the receipt given, "" for the current
     * reservation.
     *
     * @return array{0: string, 1: string}
     * @throws InvalidArgumentException
     */
    public static function reservation(string|int|ReservedMessage $job, ?string $receipt): array
    {
        if ($job instanceof ReservedMessage) {
            if ($receipt !== null) {
                throw new InvalidArgumentException('a ReservedMessage carries its receipt: pass a receipt only with an id');
            }
            return [$job->id, $job->receipt];
        }
        $id = Validator::name('id', $job);
        if ($receipt === '') {
            throw new InvalidArgumentException('receipt must not be empty: pass null to act on the current reservation');
        }
        return [$id, $receipt ?? ''];
    }

    /**
     * ack.lua for a reservation of {@see reservation()}.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function ack(Keys $keys, string $id, string $receipt): array
    {
        return [Scripts::ACK, [$keys->reserved(), $keys->bucket($id), $keys->pool()], [$id, $receipt]];
    }

    /**
     * touch.lua for a reservation of {@see reservation()} and a checked ttr.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function touch(Keys $keys, string $id, string $receipt, int $ttrMs): array
    {
        return [Scripts::TOUCH, [$keys->reserved(), $keys->bucket($id), $keys->pool()], [$id, $receipt, (string) $ttrMs]];
    }

    /**
     * release.lua in "held" mode: $action is a delay in ms, "backoff" or
     * "bury"; $error why the attempt failed ("" for nothing to say), sent
     * cut to the bytes the script keeps.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function release(Keys $keys, string $id, string $receipt, string $action, string $error = ''): array
    {
        return [
            Scripts::RELEASE,
            [$keys->reserved(), $keys->pool(), $keys->malformed(), $keys->scheduledCount()],
            [
                $keys->bucketPrefix(), $keys->deadPrefix(), $action, 'held', $id, $receipt, $keys->wake(),
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
        if ($reply === false || $reply === null) {
            return false;
        }
        if (!\is_string($reply)) {
            throw new ProtocolException('unexpected reply from release.lua: ' . get_debug_type($reply));
        }
        return true;
    }

    /**
     * reschedule.lua for a checked id and delay.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reschedule(Keys $keys, string $id, int $delayMs): array
    {
        return [Scripts::RESCHEDULE, [$keys->pool(), $keys->bucket($id)], [$id, (string) $delayMs, $keys->wake()]];
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
        return [
            Scripts::DEAD,
            [$keys->dead($topic), $keys->pool(), $keys->scheduledCount()],
            [$keys->bucketPrefix(), $topic, 'list', (string) $start, (string) $count],
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
            if (!\is_array($entry) || \count($entry) !== 6 || !\is_int($entry[3])) {
                throw new ProtocolException('unexpected entry from dead.lua: ' . get_debug_type($entry));
            }
            [$id, $topicOf, $body, $attempts, $reason, $deadAt] = $entry;
            $letters[] = new DeadLetter(
                (string) $id,
                (string) $topicOf,
                (string) $body,
                $attempts,
                (string) $reason,
                // dead_at is written with dead_reason; a hand-edited bucket without it reads as 0
                \is_string($deadAt) && is_numeric($deadAt) ? (float) $deadAt : 0.0
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
        $argv = [$keys->bucketPrefix(), $topic, $action];
        $argv = $ids === null
            ? [...$argv, (string) Scripts::DEAD_MAX_PER_CALL]
            : [...$argv, (string) \count($ids), ...$ids];
        return [Scripts::DEAD, [$keys->dead($topic), $keys->pool(), $keys->scheduledCount()], $argv];
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
