<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/** A topic's dead letters (jobs buried, or out of attempts): list, requeue, purge, all by dead.lua. */
trait DeadLetters
{
    /**
     * A topic's dead letters, newest first; those removed or pushed again since are skipped.
     *
     * @param int $count 1 to 1000
     * @return list<DeadLetter>
     * @throws InvalidArgumentException on a bad topic, start or count
     */
    public function deadLetters(string $topic, int $start = 0, int $count = 100): array
    {
        $topic = $this->keys->topic($topic);
        Validator::deadRange($start, $count);
        return Replies::deadList($this->connection->script(...Calls::deadList($this->keys, $topic, $start, $count)));
    }

    /**
     * Puts dead letters back, due now, attempts reset to 0.
     *
     * @param list<string>|null $ids null: the whole list (1000 per call, oldest first)
     * @return int how many were requeued
     * @throws InvalidArgumentException on a bad topic or id
     */
    public function requeueDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'requeue');
    }

    /**
     * Deletes dead letters for good, their jobs' data included.
     *
     * @param list<string>|null $ids null: the whole list (1000 per call, oldest first)
     * @return int how many were deleted
     * @throws InvalidArgumentException on a bad topic or id
     */
    public function purgeDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'purge');
    }

    /** @param array<mixed>|null $ids in calls of 1000; null: the whole list, until a call takes fewer */
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
