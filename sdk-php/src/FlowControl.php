<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\RedisErrorException;

/**
 * Pausing, resuming and rate-limiting a topic (docs/PROTOCOL.md, "Flow
 * control"): one flow.lua (flow_topic.lua) call each. A paused topic hands out
 * nothing: pop() / reserve() return false, bPop() / bReserve() wait, and its
 * waits end at the resume; pushes, acks and the rest go on. A rate-limited one
 * has its due jobs made ready at most so fast. The state is in Redis, shared
 * by every client, worker and server of the prefix.
 *
 * Each method throws InvalidArgumentException on a bad topic (before any
 * Redis call) and RedisErrorException (WRONGTYPE, naming the key) when one of
 * the topic's flow keys holds another type; nothing is written then.
 */
trait FlowControl
{
    /**
     * Pauses $topic: its jobs stay where they are until resume().
     *
     * @return bool true when the topic was running (false: already paused, nothing changed)
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function pause(string $topic): bool
    {
        return $this->flowCall($topic, 'pause')->changed;
    }

    /**
     * Resumes $topic: waiting consumers wake at once, and the server hands out its held jobs.
     *
     * @return bool true when the topic was paused (false: it was running, nothing changed)
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function resume(string $topic): bool
    {
        return $this->flowCall($topic, 'resume')->changed;
    }

    /**
     * Whether $topic is paused now.
     *
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function isPaused(string $topic): bool
    {
        return $this->flow($topic)->isPaused();
    }

    /**
     * $topic's flow control, read only: paused since when, its rate limit, how many due jobs the pause or the
     * limit holds back.
     *
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function flow(string $topic): FlowState
    {
        return $this->flowCall($topic, 'get');
    }

    /**
     * Limits how many of $topic's jobs become ready per second, in every server of the prefix together: at most
     * $burst + $perSecond * t in any t seconds (a token bucket of $burst jobs, refilled at $perSecond). Due jobs
     * over the limit wait in due order and count as held (flow(), stats()); a job already ready goes out at
     * consumer speed. Setting a limit again changes it (the bucket keeps what it had, at most the new burst); a
     * pause still stops the topic, and at the resume its backlog drains at the limit.
     *
     * The rules are Redis's (flow.lua, the same for every SDK, the CLI and HTTP): $perSecond finite, from one job a
     * day (1/86400) to 1000000; $burst from 1 to 1000000 and at least 1% of the rate. A rate of 0 is refused with
     * a pointer to pause(): that is what stops a topic.
     *
     * @param int|float $perSecond jobs per second, e.g. 50, or 0.5 for one job every two seconds
     * @param int|null  $burst     jobs that may become ready at once; null: one second's worth, max(1, ceil($perSecond))
     * @return FlowState the topic's state after the call ($changed: whether the rate or burst is new)
     * @throws InvalidArgumentException on a bad topic (before any Redis call), or a rate or burst flow.lua refused
     *                                  (the message is its reason, nothing is written)
     * @throws RedisErrorException
     */
    public function setRateLimit(string $topic, int|float $perSecond, ?int $burst = null): FlowState
    {
        return $this->flowCall($topic, 'limit', $perSecond, $burst);
    }

    /**
     * Removes $topic's rate limit: what it held back becomes ready at full speed (a pause stays).
     *
     * @return bool true when the topic had a limit (false: it had none, nothing changed)
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function clearRateLimit(string $topic): bool
    {
        return $this->flowCall($topic, 'unlimit')->changed;
    }

    /** @param value-of<Scripts::FLOW_ACTIONS> $action */
    private function flowCall(string $topic, string $action, int|float|null $perSecond = null, ?int $burst = null): FlowState
    {
        return Replies::flow($this->connection->script(...Calls::flow($this->keys, $topic, $action, $perSecond, $burst)));
    }
}
