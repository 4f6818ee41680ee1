<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * mix/delayer-client 1.x's four methods: push(), pop(), bPop(), remove(),
 * at most once (a popped job is deleted as it is handed out).
 *
 * Apart so that their 1.x declarations (untyped, 1.x's parameter names,
 * 1.x's loose input) stay in one place, away from Delayer 2's typed
 * methods: a 1.x subclass of {@see Client} that overrides them still loads,
 * and tests/compat/v1_script.php pins what they do. push() writes through
 * {@see Pushes}; bPop() waits with {@see BlockingWait}. Used by
 * {@see Client}, whose connection and keys it reads.
 */
trait LegacyApi
{
    /**
     * Schedules a job, as mix/delayer-client 1.x did: it reaches its topic's
     * ready queue $delayTime seconds from now (Redis's clock).
     *
     * Takes what 1.x took: a delay or lifetime given as a numeric string
     * ("30"), a negative delay (due now), an int id. Like 1.x it refuses a
     * Message whose id, topic or body is empty: a Delayer 1.x server drops
     * a job with an empty body ("Job bucket has expired or is incomplete"),
     * so a fleet that still runs one must not push it (docs/PROTOCOL.md, "The
     * job bucket"); {@see schedule()} pushes one. Declared as 1.x declared
     * it, so a 1.x subclass overriding it still loads.
     *
     * Ids are global across topics (the Delayer 1.x key layout): pushing an
     * id that a job already has, on any topic, replaces that job (its
     * topic, data and due time), as Delayer 1.x does. To be told instead,
     * use schedule(..., ifAbsent: true).
     *
     * @param Message         $message          the job
     * @param int|float|string $delayTime       seconds, up to 315360000, fractions allowed
     *                                          (rounded to the millisecond); below 0: now
     * @param int|float|string $readyMaxLifetime how long, in whole seconds (1 to 315360000),
     *                                          a due job waits for a consumer before it expires
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input, an empty body included
     *                                  (nothing is sent to Redis)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function push(Message $message, $delayTime, $readyMaxLifetime = 604800)
    {
        if ($message->body === '') {
            throw new InvalidArgumentException(
                'Invalid message: the body is empty (Delayer 1.x consumers drop such a job; schedule() pushes it)'
            );
        }
        $delay = Validator::legacySeconds('delayTime', $delayTime);
        return $this->pushOne(
            Calls::job($this->keys, $message, max($delay, 0), Validator::legacySeconds('readyMaxLifetime', $readyMaxLifetime)),
            false
        );
    }

    /**
     * Takes the next ready job of a topic, if any, without waiting. The job
     * is deleted from Redis as it is handed out (at most once). Ids whose
     * job expired or was removed are skipped. Declared as 1.x declared it.
     *
     * @param string|int $topic any non-empty string (an int is its decimal string)
     *
     * @return Message|false the job, or false when none is ready
     * @throws InvalidArgumentException on a bad topic
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pop($topic)
    {
        $call = Calls::pop($this->keys, $this->keys->topic($topic));
        return Replies::pop($this->connection->script(...$call));
    }

    /**
     * Takes the next ready job of a topic, waiting up to $timeout seconds
     * for one (BRPOP, then take.lua; an id whose job is gone is skipped and
     * the wait goes on within the same timeout). Declared as 1.x declared it.
     *
     * @param string|int       $topic   any non-empty string (an int is its decimal string)
     * @param int|float|string $timeout seconds, fractions allowed (a numeric string too); 0 waits forever
     * @return Message|false the job, or false when the timeout passed
     * @throws InvalidArgumentException on a bad topic or timeout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bPop($topic, $timeout)
    {
        $topic = $this->keys->topic($topic);
        $timeout = Validator::timeout(Validator::legacySeconds('timeout', $timeout));
        $queue = (string) $this->keys->names($topic)->ready;
        return BlockingWait::until($timeout, function (float $wait) use ($queue, $topic): Message|false|null {
            $reply = $this->connection->blocking('BRPOP', [$queue], $wait);
            if ($reply === null) {
                return null;
            }
            $call = Calls::take($this->keys, Replies::brpop($reply), $topic);
            return Replies::take($this->connection->script(...$call));
        });
    }

    /**
     * Cancels a job: a waiting job is never delivered; a job already in its
     * ready queue loses its data, so pop skips it. A job already popped
     * cannot be recalled. Declared as 1.x declared it, so a 1.x subclass
     * overriding it still loads; the job's topic is an optional second
     * argument, `remove($id, $topic)`, read with func_get_args(): needed in
     * the per-topic layout (ids are per topic there), checked and not needed
     * in the classic one.
     *
     * @param string|int $id any non-empty string (an int is its decimal string)
     *
     * @return bool true when something was cancelled, false when the id was
     *              unknown (never pushed, already popped, or expired)
     * @throws InvalidArgumentException on a bad id or topic, or no topic in the per-topic layout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function remove($id)
    {
        $id = Validator::name('id', $id);
        $args = \func_get_args();
        if (\count($args) > 2) {
            throw new InvalidArgumentException(sprintf('remove() takes an id and a topic, got %d arguments', \count($args)));
        }
        $topic = $this->keys->idTopic($args[1] ?? null, 'remove', 'remove($id, $topic)');
        $call = Calls::remove($this->keys, $id, $topic);
        return Replies::remove($this->connection->script(...$call));
    }
}
