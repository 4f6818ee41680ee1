<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\IdTakenException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\NotReplicatedException;

/** Delayer 2's pushes, and the durable option's wait for a replica (1.x's push() goes through pushOne() too). */
trait Pushes
{
    /**
     * Schedules a job: as push(), but an empty body is valid, a delay is 0 or more, and `ifAbsent: true` keeps a taken id's job.
     *
     * @param int|float $delay            seconds, 0 to 315360000 (rounded to the millisecond)
     * @param int|float $readyMaxLifetime whole seconds, 1 to 315360000
     * @return bool true (failures raise exceptions)
     * @throws InvalidArgumentException on bad input (nothing is sent)
     * @throws IdTakenException         with ifAbsent, when the id is taken
     * @throws NotReplicatedException   with the durable option, when no replica has it in time
     */
    public function schedule(
        Message $message,
        int|float $delay,
        int|float $readyMaxLifetime = self::DEFAULT_READY_MAX_LIFETIME,
        bool $ifAbsent = false,
    ): bool {
        return $this->pushOne(Calls::job($this->keys, $message, $delay, $readyMaxLifetime), $ifAbsent);
    }

    /** schedule() of a job from its parts, with the default ready_max_lifetime. */
    public function pushTo(string $topic, string|int $id, int|float $delay, string $body = '', bool $ifAbsent = false): bool
    {
        $message = Message::create(Validator::name('id', $id), $topic, $body);
        return $this->schedule($message, $delay, self::DEFAULT_READY_MAX_LIFETIME, $ifAbsent);
    }

    /**
     * Schedules many jobs, every one checked first: 100 per push_many.lua call
     * (atomic together; the batch is not), 10 calls per round trip.
     *
     * @param iterable<ScheduledMessage|array{0: Message, 1: int|float, 2?: int}> $messagesWithDelays
     * @return int the number of jobs pushed
     * @throws InvalidArgumentException on a bad item (nothing is sent)
     * @throws IdTakenException         with ifAbsent, when ids were taken (the others are written; it has their due times)
     */
    public function pushMany(iterable $messagesWithDelays, bool $ifAbsent = false): int
    {
        $jobs = [];
        foreach ($messagesWithDelays as $index => $item) {
            $what = sprintf('pushMany item %s', var_export($index, true));
            $count = \is_array($item) ? \count($item) : 0;
            if ($count >= 2 && $count <= 3 && array_is_list($item) && $item[0] instanceof Message
                && (\is_int($item[1]) || \is_float($item[1])) && ($count === 2 || \is_int($item[2]) || \is_float($item[2]))) {
                $item = new ScheduledMessage($item[0], $item[1], $item[2] ?? self::DEFAULT_READY_MAX_LIFETIME);
            }
            if (!$item instanceof ScheduledMessage) {
                $got = \is_array($item) ? '' : ', got ' . get_debug_type($item);
                throw new InvalidArgumentException("{$what}: expected a ScheduledMessage or [Message, delay(, readyMaxLifetime)]{$got}");
            }
            try {
                $jobs[] = Calls::job($this->keys, $item->message, $item->delay, $item->readyMaxLifetime);
            } catch (InvalidArgumentException $e) {
                throw new InvalidArgumentException("{$what}: {$e->getMessage()}", 0, $e);
            }
        }
        $dues = array_fill(0, \count($jobs), null);
        $taken = [];
        $topics = []; // the topics written: a durable push waits on each one's node
        foreach (array_chunk(Calls::pushMany($this->keys, $jobs, $ifAbsent), Scripts::PUSH_MANY_CALLS_PER_PIPELINE) as $pipeline) {
            $calls = array_map(static fn (array $call): array => [$call[1], $call[2]], $pipeline);
            foreach ($this->connection->pipelined($pipeline[0][0], $calls) as $i => $reply) {
                $indexes = $pipeline[$i][3];
                foreach (Replies::pushMany($reply, array_map(fn (int $j): string => $jobs[$j][1][0], $indexes)) as $k => $due) {
                    $index = $indexes[$k];
                    if ($due instanceof Taken) {
                        $taken[$index] = $due;
                        continue;
                    }
                    $dues[$index] = $due;
                    $topics[$jobs[$index][1][1]] = true;
                }
            }
        }
        // One WAIT covers every write this connection made (on a cluster, one per topic's node).
        $this->awaitReplica(\count($jobs) - \count($taken), array_map('strval', array_keys($topics)));
        if ($taken !== []) {
            ksort($taken); // calls are per topic in the per-topic layout: back to input order
            throw new IdTakenException(array_values($taken), $dues);
        }
        return \count($jobs);
    }

    /**
     * Moves a waiting job's due time (and its expiry) to $delay seconds from now; never creates a job.
     *
     * @param string|null $topic needed in the per-topic layout
     * @return float|false the new due time in Unix seconds, or false when the job is not waiting
     * @throws InvalidArgumentException on a bad id, delay or topic
     */
    public function reschedule(string $id, int|float $delay, ?string $topic = null): float|false
    {
        $id = Validator::name('id', $id);
        $delayMs = Validator::delayMs($delay);
        $topic = $this->keys->idTopic($topic, 'reschedule', 'reschedule($id, $delay, $topic)');
        $reply = $this->connection->script(...Calls::reschedule($this->keys, $id, $delayMs, $topic));
        return Replies::reschedule($reply);
    }

    /** @param array{0: list<string>, 1: list<string>} $job of {@see Calls::job()} */
    private function pushOne(array $job, bool $ifAbsent): bool
    {
        $due = Replies::push($this->connection->script(...Calls::push($this->keys, $job, $ifAbsent)), $job[1][0]);
        if ($due instanceof Taken) {
            throw new IdTakenException([$due], [null]);
        }
        $this->awaitReplica(1, [$job[1][1]]);
        return true;
    }

    /** @param list<string> $topics written: with the durable option, WAIT for a replica of them (on a cluster, per node) */
    private function awaitReplica(int $jobs, array $topics): void
    {
        if ($this->durable === null || $jobs <= 0) {
            return;
        }
        $keys = array_map(fn (string $topic): string => $this->keys->names($topic)->pool, $topics);
        if ($this->connection->waitForReplica($this->durable, $keys) < 1) {
            throw new NotReplicatedException($jobs, $this->durable);
        }
    }
}
