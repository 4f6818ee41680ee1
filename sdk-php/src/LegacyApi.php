<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * mix/delayer-client 1.x's four methods, at most once, declared as 1.x did
 * (untyped, loose input: numeric strings, int ids) so that a 1.x subclass
 * overriding them still loads; tests/compat/v1_script.php pins what they do.
 */
trait LegacyApi
{
    /**
     * Schedules a job due $delayTime seconds from now (below 0: now), replacing the job holding its id, as 1.x did.
     *
     * @param int|float|string $delayTime        seconds, up to 315360000, rounded to the millisecond
     * @param int|float|string $readyMaxLifetime whole seconds (1 to 315360000) a due job waits for a consumer
     * @return bool true (failures raise exceptions)
     * @throws InvalidArgumentException on bad input (nothing is sent)
     */
    public function push(Message $message, $delayTime, $readyMaxLifetime = 604800)
    {
        if ($message->body === '') {
            throw new InvalidArgumentException('Invalid message: the body is empty (Delayer 1.x consumers drop such a job; schedule() pushes it)');
        }
        $delay = max(Validator::legacySeconds('delayTime', $delayTime), 0);
        return $this->pushOne(Calls::job($this->keys, $message, $delay, Validator::legacySeconds('readyMaxLifetime', $readyMaxLifetime)), false);
    }

    /**
     * Takes the next ready job of a topic without waiting, deleting it.
     *
     * @param string|int $topic
     * @return Message|false false when none is ready
     * @throws InvalidArgumentException on a bad topic
     */
    public function pop($topic)
    {
        $call = Calls::pop($this->keys, $this->keys->topic($topic));
        return Replies::pop($this->connection->script(...$call));
    }

    /**
     * pop(), waiting up to $timeout seconds (0: forever): pop.lua, then BRPOP and take.lua.
     *
     * @param string|int       $topic
     * @param int|float|string $timeout
     * @return Message|false false when the timeout passed
     * @throws InvalidArgumentException on a bad topic or timeout
     */
    public function bPop($topic, $timeout)
    {
        $topic = $this->keys->topic($topic);
        $timeout = Validator::timeout(Validator::legacySeconds('timeout', $timeout));
        $queue = (string) $this->keys->names($topic)->ready;
        $pop = Calls::pop($this->keys, $topic);
        return BlockingWait::until(
            $timeout,
            $this->connection,
            fn (): Message|array|false => Replies::wait($reply = $this->connection->script(...$pop)) ?? Replies::pop($reply),
            function (float $wait) use ($queue, $topic): Message|array|false|null {
                $reply = $this->connection->blocking('BRPOP', [$queue], $wait);
                if ($reply === null) {
                    return null;
                }
                $reply = $this->connection->script(...Calls::take($this->keys, Replies::brpop($reply), $topic));
                return Replies::wait($reply) ?? Replies::take($reply);
            },
        );
    }

    /**
     * Cancels a job not yet popped; the topic (per-topic layout) is read with func_get_args(): remove($id, $topic).
     *
     * @param string|int $id
     * @return bool true when something was cancelled, false when the id was unknown
     * @throws InvalidArgumentException on a bad id or topic
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
