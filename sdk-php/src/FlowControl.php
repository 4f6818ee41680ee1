<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\RedisErrorException;

/**
 * Pausing and resuming a topic (docs/PROTOCOL.md, "Flow control"): one
 * flow.lua (flow_topic.lua) call each. A paused topic hands out nothing:
 * pop() / reserve() return false, bPop() / bReserve() wait, and its waits end
 * at the resume; pushes, acks and the rest go on. The state is in Redis, shared
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
     * $topic's flow control, read only: paused since when, how many due jobs the pause holds back.
     *
     * @throws InvalidArgumentException|RedisErrorException
     */
    public function flow(string $topic): FlowState
    {
        return $this->flowCall($topic, 'get');
    }

    /** @param value-of<Scripts::FLOW_ACTIONS> $action */
    private function flowCall(string $topic, string $action): FlowState
    {
        return Replies::flow($this->connection->script(...Calls::flow($this->keys, $topic, $action)));
    }
}
