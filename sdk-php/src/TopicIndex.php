<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * The per-topic layout's index write (docs/PROTOCOL.md, "The index
 * write"): after a call that scheduled or reserved, the topic's earliest
 * time goes into `<prefix>due` (ZADD LT CH, so it only ever lowers it), a
 * push also adds the topic to `<prefix>topics`, and a lowered time is
 * published on `<prefix>wake` so a sleeping server wakes for it. The
 * scripts get no wake channel in this layout: a topic's pool says nothing
 * about the others', so only the index can tell whether the time is new.
 *
 * Apart because pushes, reservations and dead letters all end with it. The
 * index is a hint the server repairs (its sweep reads every topic's pool
 * head within about 10 s), so it is written after the call and not inside
 * it, and an index command Redis refuses (a key of another type, a full
 * Redis, an ACL) does not fail the call whose script ran: {@see heard()},
 * the one place that decides it, warns once per key and command
 * (error_log()). A lost connection raises (ConnectionException), as any
 * call's: whether the script ran is then unknown; sending a push again is
 * safe (it replaces), while a reserved job comes back after its ttr.
 * Used by {@see Client}, whose connection and keys it reads.
 */
trait TopicIndex
{
    /** @var array<string, true> the "command key" pairs warned about: three keys per prefix */
    private static array $indexWarned = [];

    /**
     * Writes $time ("s.mmm" as the script answered it, or "0") for $topic
     * into the index, in the per-topic layout; nothing in the classic one.
     *
     * @throws ConnectionException|ProtocolException
     */
    private function indexWrite(string $topic, string $time, bool $pushed): void
    {
        if (!$this->keys->isPerTopic()) {
            return;
        }
        if (Ops::indexLowered($this->hints(Ops::indexWrite($this->keys, $topic, $time, $pushed)))) {
            $this->wake($time);
        }
    }

    /**
     * Publishes $time on `<prefix>wake`: the index was lowered to it. Only
     * a wake-up, as push.lua's pcall'd PUBLISH is in the classic layout:
     * refused (an ACL user without the channel), the server reads the index
     * entry within timer_interval.
     *
     * @throws ConnectionException
     */
    private function wake(string $time): void
    {
        $this->hints(Ops::wake($this->keys, $time));
    }

    /**
     * Sends index commands; their replies, {@see heard()}.
     *
     * @param list<array{0: string, 1: list<string>}> $commands
     * @return list<mixed>
     * @throws ConnectionException
     */
    private function hints(array $commands): array
    {
        try {
            $replies = $this->connection->commands($commands, true);
        } catch (RedisErrorException $e) { // phpredis raises an ACL refusal mid-pipeline
            $replies = array_fill(0, \count($commands), $e);
        }
        return self::heard($commands, $replies);
    }

    /**
     * The replies of index commands, a refused one (a RedisErrorException)
     * as null: never the call's error. Warned once per key and command in
     * this process, naming the key.
     *
     * @param list<array{0: string, 1: list<string>}> $commands
     * @param list<mixed> $replies
     * @return list<mixed>
     */
    private static function heard(array $commands, array $replies): array
    {
        foreach ($replies as $i => $reply) {
            if (!$reply instanceof RedisErrorException) {
                continue;
            }
            $replies[$i] = null;
            $seen = $commands[$i][0] . ' ' . $commands[$i][1][0];
            if (!isset(self::$indexWarned[$seen])) {
                self::$indexWarned[$seen] = true;
                error_log("delayer: warning: the index write {$seen} failed ({$reply->getMessage()}); the call went on, "
                    . "and the server's sweep repairs the index within about 10 s (further failures of it not logged)");
            }
        }
        return $replies;
    }
}
