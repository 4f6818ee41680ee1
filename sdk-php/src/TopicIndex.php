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
 * index is a hint the server re-checks (its sweeps find a job whose index
 * write was lost), so it is written after the call and not inside it. A
 * failed index write raises as any call does (ConnectionException, ...):
 * the call itself has run, and sending it again is safe for a push (it
 * replaces), while a reserved job comes back after its ttr.
 * Used by {@see Client}, whose connection and keys it reads.
 */
trait TopicIndex
{
    /**
     * Writes $time ("s.mmm" as the script answered it, or "0") for $topic
     * into the index, in the per-topic layout; nothing in the classic one.
     *
     * @throws ConnectionException|RedisErrorException|ProtocolException
     */
    private function indexWrite(string $topic, string $time, bool $pushed): void
    {
        if (!$this->keys->isPerTopic()) {
            return;
        }
        if (Ops::indexLowered($this->connection->commands(Ops::indexWrite($this->keys, $topic, $time, $pushed)))) {
            $this->wake($time);
        }
    }

    /**
     * Publishes $time on `<prefix>wake`: the index was lowered to it.
     *
     * @throws ConnectionException
     */
    private function wake(string $time): void
    {
        try {
            $this->connection->commands(Ops::wake($this->keys, $time));
        } catch (RedisErrorException) {
            // Refused (an ACL user without the channel): the wake-up is a
            // hint, as push.lua's pcall'd PUBLISH is in the classic layout;
            // the server reads the index entry within timer_interval.
        }
    }
}
