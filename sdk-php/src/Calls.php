<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * What each operation sends, without I/O: `[name, KEYS, ARGV]` for RedisLink::script(...$call),
 * from checked input and the {@see Names} of the call's topic, so nothing here depends on the layout.
 *
 * @internal used by {@see Client}
 */
final class Calls
{
    /** deadList() caps its start here: past any list's length, exact in Lua's doubles. */
    private const MAX_LIST_INDEX = 1 << 50;

    /** @return array{0: list<string>, 1: list<string>} one job checked: push.lua's KEYS, ARGV[1..9] and the traceparent */
    public static function job(Keys $keys, Message $message, int|float $delay, int|float $readyMaxLifetime): array
    {
        $id = Validator::name('id', $message->id);
        $topic = $keys->topic($message->topic);
        $delayMs = Validator::delayMs($delay);
        $lifetimeMs = Validator::lifetimeMs(self::wholeSeconds($readyMaxLifetime));
        // Retry settings not set go as "": the bucket stays exactly Delayer 1.x's.
        $maxAttempts = $message->maxAttempts === null ? '' : (string) Validator::maxAttempts($message->maxAttempts);
        $backoff = $message->backoff;
        $n = $keys->names($topic);
        return [
            [$n->pool, $n->bucket($id), ...$n->counts],
            [
                $id, $topic, $message->body, (string) $delayMs, (string) $lifetimeMs, $maxAttempts,
                $backoff?->kind ?? '', (string) ($backoff?->backoffMs ?? ''), (string) ($backoff?->backoffMaxMs ?? ''),
                Traceparent::check($message->traceparent) ?? '',
            ],
        ];
    }

    public static function push(Keys $keys, array $job, bool $ifAbsent): array
    {
        $n = $keys->names($job[1][1]);
        return [$n->script(Scripts::PUSH), $job[0], [...\array_slice($job[1], 0, 9), self::policy($ifAbsent), $n->wake, $job[1][9]]];
    }

    /**
     * push_many.lua's calls of at most PUSH_MANY_MAX_JOBS jobs, grouped by pool.
     *
     * @param list<array{0: list<string>, 1: list<string>}> $jobs
     * @return list<array{0: string, 1: list<string>, 2: list<string>, 3: list<int>}> [name, KEYS, ARGV, indexes in $jobs]
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
                $calls[] = [$n->script(Scripts::PUSH_MANY), [$n->pool, ...$n->counts], $argv, $chunk];
            }
        }
        return $calls;
    }

    public static function pop(Keys $keys, string $topic): array
    {
        $n = $keys->names($topic);
        return [Scripts::POP, [(string) $n->ready, $n->malformed, $n->pool, $n->reserved, (string) $n->flow, (string) $n->gate], [$n->bucketPrefix]];
    }

    /** After BRPOP took $id from $topic's ready list: take.lua puts it back there while the topic is paused. */
    public static function take(Keys $keys, string $id, string $topic): array
    {
        $n = $keys->names($topic);
        return [Scripts::TAKE, [$n->bucket($id), $n->malformed, $n->pool, $n->reserved, (string) $n->ready, (string) $n->flow, (string) $n->gate], [$id]];
    }

    public static function remove(Keys $keys, string $id, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [$n->script(Scripts::REMOVE), [$n->pool, $n->bucket($id), ...$n->counts], [$id, ...$n->removeTail]];
    }

    public static function reserve(Keys $keys, string $topic, int $ttrMs): array
    {
        return self::reserveMany($keys, $topic, $ttrMs, null, []);
    }

    /** @param list<array{0: string, 1: string}> $acks [id, receipt] pairs acked first; $count null: one job, not in batch mode */
    public static function reserveMany(Keys $keys, string $topic, int $ttrMs, ?int $count, array $acks): array
    {
        $n = $keys->names($topic);
        $argv = [$n->bucketPrefix, (string) $ttrMs, (string) $count];
        foreach ($acks as [$id, $receipt]) {
            array_push($argv, $id, $receipt);
        }
        return [
            Scripts::RESERVE,
            [(string) $n->ready, $n->reserved, $n->malformed, $n->receiptSeq, $n->pool, $n->outcomes, (string) $n->flow, (string) $n->gate],
            [...$argv, $n->wake],
        ];
    }

    /** @return array{0: string, 1: string, 2: string|null} the id, receipt ("": the current one) and topic of ack, touch, ... */
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

    public static function ack(Keys $keys, string $id, string $receipt, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::ACK, [$n->reserved, $n->bucket($id), $n->pool, $n->outcomes], [$id, $receipt]];
    }

    public static function touch(Keys $keys, string $id, string $receipt, int $ttrMs, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::TOUCH, [$n->reserved, $n->bucket($id), $n->pool], [$id, $receipt, (string) $ttrMs, $n->wake]];
    }

    /** release.lua's "held" mode: $action is a delay in ms, "backoff" or "bury". */
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
            $n->script(Scripts::RELEASE),
            [$n->reserved, $n->pool, $n->malformed, $n->releaseKey, $n->outcomes],
            [...$n->releaseArgv, $action, 'held', $id, $receipt, $n->wake, substr($error, 0, Scripts::ERROR_MAX_BYTES)],
        ];
    }

    public static function reschedule(Keys $keys, string $id, int $delayMs, ?string $topic = null): array
    {
        $n = $keys->names($topic);
        return [Scripts::RESCHEDULE, [$n->pool, $n->bucket($id)], [$id, (string) $delayMs, $n->wake, $n->flowPoolPrefix]];
    }

    public static function deadList(Keys $keys, string $topic, int $start, int $count): array
    {
        $start = min($start, self::MAX_LIST_INDEX);
        $n = $keys->names($topic);
        return [
            $n->script(Scripts::DEAD),
            [(string) $n->dead, $n->pool, ...$n->counts],
            [$n->bucketPrefix, $topic, 'list', (string) $start, (string) $count],
        ];
    }

    /** @param list<string>|null $ids null: DEAD_MAX_PER_CALL from the oldest end */
    public static function deadAction(Keys $keys, string $topic, string $action, ?array $ids): array
    {
        $n = $keys->names($topic);
        // a requeue announces on the wake channel, which rides on the action
        $argv = [$n->bucketPrefix, $topic, $action === 'requeue' ? "requeue {$n->wake}" : $action];
        $argv = $ids === null
            ? [...$argv, (string) Scripts::DEAD_MAX_PER_CALL]
            : [...$argv, (string) \count($ids), ...$ids];
        return [$n->script(Scripts::DEAD), [(string) $n->dead, $n->pool, ...$n->counts], $argv];
    }

    public static function lookup(Keys $keys, string $topic, string $id): array
    {
        $n = $keys->names($topic);
        return [Scripts::LOOKUP, [$n->bucket($id), $n->pool, $n->reserved, (string) $n->flow], [$id, $topic, $n->flowPoolPrefix]];
    }

    /** stats.lua, the classic layout's numbers (the per-topic layout reads each topic's keys: {@see Inspect::stats()}). */
    public static function stats(Keys $k): array
    {
        return [
            Scripts::STATS,
            [$k->topics(), $k->scheduledCount(), $k->pool(), $k->reserved(), $k->flowTopics()],
            [$k->readyQueuePrefix(), $k->deadPrefix(), $k->bucketPrefix(), (string) Stats::RESERVED_CAP, $k->flowPrefix(), $k->flowPoolPrefix()],
        ];
    }

    /** @param 'scheduled'|'reserved'|'ready' $what */
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

    /**
     * flow.lua / flow_topic.lua: read ("get"), pause, resume, rate-limit ("limit") or unlimit $topic's flow control.
     * A limit's rate and burst go as the script reads them and are checked only there (one set of rules for every
     * SDK, the CLI and HTTP): a refusal comes back as InvalidArgumentException from the connection.
     *
     * @param value-of<Scripts::FLOW_ACTIONS> $action
     * @param int|float|null $perSecond "limit" only: jobs per second
     * @param int|null       $burst     "limit" only: null for the script's default (one second's worth)
     * @throws InvalidArgumentException on a bad topic
     */
    public static function flow(Keys $keys, string $topic, string $action, int|float|null $perSecond = null, ?int $burst = null): array
    {
        $topic = $keys->topic($topic);
        if (!\in_array($action, Scripts::FLOW_ACTIONS, true)) {
            throw new InvalidArgumentException(sprintf('flow action "%s" is not one of %s', $action, implode(', ', Scripts::FLOW_ACTIONS)));
        }
        $n = $keys->names($topic);
        // ARGV[4] and ARGV[5] always go (one shape per script, issue 21): "" when the action takes no limit
        $rate = $perSecond === null ? '' : (\is_int($perSecond) ? (string) $perSecond : self::decimal($perSecond));
        return [
            $n->script(Scripts::FLOW),
            [(string) $n->flow, (string) $n->gate, ...$n->flowKeys],
            [$topic, $action, $n->wake, $rate, $burst === null ? '' : (string) $burst],
        ];
    }

    /**
     * The shortest decimal that reads back as $f, whatever the php.ini says: (string) keeps only `precision` (14)
     * digits, so 1/3 would be stored as another rate, and json_encode/var_export follow `serialize_precision`.
     * Plain digits across every allowed rate (1/86400 .. 1e6), so the stored text reads as a rate; NAN and INF go
     * as PHP spells them, for the script to refuse by name.
     */
    public static function decimal(float $f): string
    {
        if (!is_finite($f)) {
            return (string) $f;
        }
        // %.{p}e has p + 1 significant digits, correctly rounded; 17 always read back
        for ($p = 0; $p < 16; $p++) {
            if ((float) sprintf("%.{$p}e", $f) === $f) {
                break;
            }
        }
        $e = sprintf("%.{$p}e", $f);
        $exponent = (int) substr($e, (int) strpos($e, 'e') + 1);
        if ($exponent < -7 || $exponent > 15) {
            return $e; // out of any allowed rate's range: refused by the script, so only its readability is lost
        }
        // the same significant digits in plain notation ("%F": no locale's comma)
        return sprintf('%.' . max(0, $p - $exponent) . 'F', $f);
    }

    private static function policy(bool $ifAbsent): string
    {
        return $ifAbsent ? Scripts::IF_ABSENT : Scripts::REPLACE;
    }

    private static function wholeSeconds(int|float $seconds): int
    {
        if (\is_float($seconds)) {
            if (!is_finite($seconds) || floor($seconds) !== $seconds || abs($seconds) > PHP_INT_MAX / 1000) {
                throw new InvalidArgumentException('readyMaxLifetime must be a whole number of seconds, got ' . var_export($seconds, true));
            }
            return (int) $seconds;
        }
        return $seconds;
    }
}
