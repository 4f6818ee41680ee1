<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * A topic's dead letters (jobs buried, or out of attempts): list them,
 * put them back, or delete them.
 *
 * Apart because it is what an operator does after the fact, not part of
 * handing jobs out; dead.lua does all three. Used by {@see Client}, whose
 * connection and keys it reads.
 */
trait DeadLetters
{
    /**
     * Lists a topic's dead letters (jobs buried, or out of attempts), newest
     * first. Entries whose job was removed or pushed again since it died are
     * skipped, so a page may hold fewer than $count.
     *
     * @param int $start how many of the newest to skip, 0 or more
     * @param int $count how many to read, 1 to 1000 (one call must not hold
     *                   Redis for long)
     * @return list<DeadLetter>
     * @throws InvalidArgumentException on a bad topic, start or count
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function deadLetters(string $topic, int $start = 0, int $count = 100): array
    {
        $topic = $this->keys->topic($topic);
        Validator::deadRange($start, $count);
        return Replies::deadList($this->connection->script(...Calls::deadList($this->keys, $topic, $start, $count)));
    }

    /**
     * Puts dead letters back into the pool, due now, with their attempts
     * reset to 0 (a job whose bug was fixed gets its full max_attempts
     * again).
     *
     * @param list<string>|null $ids the ids to re-queue, or null for the
     *                               whole list (taken 1000 per call, oldest first)
     * @return int how many jobs were re-queued (ids not on the list, or whose
     *             job was removed or pushed again since, are not counted)
     * @throws InvalidArgumentException on a bad topic or id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function requeueDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'requeue');
    }

    /**
     * Deletes dead letters for good (their jobs' data included).
     *
     * @param list<string>|null $ids the ids to purge, or null for the whole
     *                               list (taken 1000 per call, oldest first)
     * @return int how many jobs were deleted (ids not on the list, or whose
     *             job was removed or pushed again since, are not counted)
     * @throws InvalidArgumentException on a bad topic or id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function purgeDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'purge');
    }

    /**
     * dead.lua's requeue or purge: the ids in calls of at most 1000, or the
     * whole list in calls of 1000 until one takes fewer (the list is empty).
     *
     * @param array<mixed>|null  $ids
     * @param 'requeue'|'purge' $action
     */
    private function dead(string $topic, ?array $ids, string $action): int
    {
        $topic = $this->keys->topic($topic);
        $done = 0;
        if ($ids !== null) {
            $ids = array_values(array_unique(Validator::ids($ids)));
            foreach (array_chunk($ids, Scripts::DEAD_MAX_PER_CALL) as $batch) {
                [$n] = Replies::deadAction($this->connection->script(...Calls::deadAction($this->keys, $topic, $action, $batch)));
                $done += $n;
            }
        } else {
            do {
                [$n, $taken] = Replies::deadAction($this->connection->script(...Calls::deadAction($this->keys, $topic, $action, null)));
                $done += $n;
            } while ($taken >= Scripts::DEAD_MAX_PER_CALL);
        }
        return $done;
    }
}
