<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * What each operation sends, without I/O (sdk-rust's `ops`): a script's
 * name, KEYS and ARGV, built from checked input and the {@see Names} of
 * the call's topic, so nothing here depends on the key layout. What the
 * replies mean is {@see Replies}'s; the client only joins the two to its
 * {@see RedisLink}.
 *
 * A call is `[script name, KEYS, ARGV]`, ready for RedisLink::script(...$call).
 *
 * @internal used by {@see Client}
 */
final class Calls
{
    /** deadList() caps its start here: past any list's length, exact in Lua's doubles. */
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
        $topic = $keys->topic($message->topic);
        $delayMs = Validator::delayMs($delay);
        $lifetimeMs = Validator::lifetimeMs(self::wholeSeconds($readyMaxLifetime));
        // Retry settings not set go as "": push.lua then writes nothing, and
        // the bucket stays exactly Delayer 1.x's.
        $maxAttempts = $message->maxAttempts === null ? '' : (string) Validator::maxAttempts($message->maxAttempts);
        $backoff = $message->backoff;
        $n = $keys->names($topic);
        return [
            $n->withCounts([$n->pool, $n->bucket($id)]),
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
     * header states), at most {@see Scripts::PUSH_MANY_MAX_JOBS} jobs per
     * call, grouped by the pool they go to (the first KEY: one shared pool in
     * the classic layout, one per topic in the per-topic layout), in the
     * input's order within a group. Each call comes with the indexes in
     * $jobs of its jobs, in the order of its reply's entries.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $jobs
     * @return list<array{0: list<string>, 1: list<string>, 2: list<int>}> KEYS, ARGV and job indexes of each call
     */
    public static function pushMany(Keys $keys, array $jobs, bool $ifAbsent): array
    {
        $groups = [];
        foreach ($jobs as $i => [$jobKeys]) {
            $groups[$jobKeys[0]][] = $i;
        }
        $calls = [];
        foreach ($groups as $indexes) {
            $n = $keys->names($jobs[$indexes[0]][1][1]);
            foreach (array_chunk($indexes, Scripts::PUSH_MANY_MAX_JOBS) as $chunk) {
                $argv = [$n->bucketPrefix, self::policy($ifAbsent), $n->wake];
                foreach ($chunk as $i) {
                    array_push($argv, ...$jobs[$i][1]);
                }
                $calls[] = [$n->withCounts([$n->pool]), $argv, $chunk];
            }
        }
        return $calls;
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
     * take.lua for the id BRPOP handed out of $topic's ready list.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function take(Keys $keys, string $id, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::TAKE, [$n->bucket($id), $n->malformed, $n->pool, $n->reserved], [$id]];
    }

    /**
     * remove.lua for a checked id (and its topic, of {@see Keys::idTopic()}).
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function remove(Keys $keys, string $id, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::REMOVE, $n->withCounts([$n->pool, $n->bucket($id)]), [$id]];
    }

    /**
     * reserve.lua for a checked topic and ttr.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reserve(Keys $keys, string $topic, int $ttrMs): array
    {
        return self::reserveMany($keys, $topic, $ttrMs, null, []);
    }

    /**
     * reserve.lua in batch mode: ack the reservations of {@see reservation()}
     * first, then reserve up to $count jobs of a checked topic (null: one
     * job, not in batch mode). The wake channel comes last in both modes.
     *
     * @param list<array{0: string, 1: string}> $acks (id, receipt) pairs
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reserveMany(Keys $keys, string $topic, int $ttrMs, ?int $count, array $acks): array
    {
        $n = $keys->names($topic);
        $argv = [$n->bucketPrefix, (string) $ttrMs, (string) $count];
        foreach ($acks as [$id, $receipt]) {
            array_push($argv, $id, $receipt);
        }
        return [
            Scripts::RESERVE,
            [(string) $n->ready, $n->reserved, $n->malformed, $n->receiptSeq, $n->pool, $n->outcomes],
            [...$argv, $n->wake],
        ];
    }

    /**
     * The id and receipt that ack / touch / release / bury send: a
     * ReservedMessage's own (its id came from Redis and is not checked
     * again), or a checked id with the receipt given, "" for the current
     * reservation.
     *
     * With $keys and $call, also the topic: the ReservedMessage's own, or
     * $topic with an id ({@see Keys::idTopic()}).
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
        $topic = $keys?->idTopic($topic, $call, "pass the ReservedMessage, or {$call}(\$id, ..., topic: \$topic)") ?? $topic;
        return [$id, $receipt ?? '', $topic];
    }

    /**
     * ack.lua for a reservation of {@see reservation()}.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function ack(Keys $keys, string $id, string $receipt, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::ACK, [$n->reserved, $n->bucket($id), $n->pool, $n->outcomes], [$id, $receipt]];
    }

    /**
     * touch.lua for a reservation of {@see reservation()} and a checked ttr.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function touch(Keys $keys, string $id, string $receipt, int $ttrMs, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::TOUCH, [$n->reserved, $n->bucket($id), $n->pool], [$id, $receipt, (string) $ttrMs, $n->wake]];
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
        $n = $keys->names($topic);
        return [
            Scripts::RELEASE,
            [$n->reserved, $n->pool, $n->malformed, $n->countsOrDead(), $n->outcomes],
            [
                $n->bucketPrefix, $n->deadPrefix, $action, 'held', $id, $receipt, $n->wake,
                substr($error, 0, Scripts::ERROR_MAX_BYTES),
            ],
        ];
    }

    /**
     * reschedule.lua for a checked id and delay.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function reschedule(Keys $keys, string $id, int $delayMs, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::RESCHEDULE, [$n->pool, $n->bucket($id)], [$id, (string) $delayMs, $n->wake]];
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
            $n->withCounts([(string) $n->dead, $n->pool]),
            [$n->bucketPrefix, $topic, 'list', (string) $start, (string) $count],
        ];
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
        // a requeue announces on the wake channel, which rides on the action (dead.lua's header)
        $argv = [$n->bucketPrefix, $topic, $action === 'requeue' ? "requeue {$n->wake}" : $action];
        $argv = $ids === null
            ? [...$argv, (string) Scripts::DEAD_MAX_PER_CALL]
            : [...$argv, (string) \count($ids), ...$ids];
        return [Scripts::DEAD, $n->withCounts([(string) $n->dead, $n->pool]), $argv];
    }

    /**
     * lookup.lua for a checked topic and id.
     *
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function lookup(Keys $keys, string $topic, string $id): array
    {
        $n = $keys->names($topic);
        return [Scripts::LOOKUP, [$n->bucket($id), $n->pool, $n->reserved], [$id, $topic]];
    }

    /**
     * list.lua over a checked topic's pool, reserved set ($reserved) or
     * ready list ($ready), from $rank: $count entries, examining at most
     * $examine.
     *
     * @param 'scheduled'|'reserved'|'ready' $what
     * @return array{0: string, 1: list<string>, 2: list<string>}
     */
    public static function list(Keys $keys, string $topic, string $what, int $rank, int $count, int $examine): array
    {
        $n = $keys->names($topic);
        $argv = [$what === 'ready' ? '' : $n->bucketPrefix, $topic, (string) $rank, (string) $count, (string) $examine];
        if ($what !== 'scheduled') {
            $argv[] = $what; // reserved: its scores are ms, list.lua answers in seconds
        }
        $key = match ($what) {
            'scheduled' => $n->pool,
            'reserved' => $n->reserved,
            'ready' => (string) $n->ready,
        };
        return [Scripts::LIST, [$key], $argv];
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
