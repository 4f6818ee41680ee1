<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\IdTakenException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\NotReplicatedException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * Delayer 2's pushes: schedule(), pushTo(), pushMany(), and reschedule()
 * for a job already waiting; with the durable option, each push then
 * waits for a replica.
 *
 * Apart so that every write into the pool, and the one place that reads
 * push.lua's and push_many.lua's answers and waits for a replica, are
 * together ({@see LegacyApi}'s push() goes through pushOne() too). Used by
 * {@see Client}, whose connection, keys and durable option it reads.
 */
trait Pushes
{
    /**
     * Schedules a job (the typed push of Delayer 2): as {@see push()}, but an
     * empty body is valid, a delay is 0 or more, and with `ifAbsent: true`
     * nothing is written when the id is taken: IdTakenException names the
     * job holding it (its topic, and its due time while it waits).
     *
     * @param int|float $delay            seconds, 0 to 315360000, fractions allowed
     *                                    (rounded to the millisecond)
     * @param int|float $readyMaxLifetime whole seconds, 1 to 315360000
     * @param bool      $ifAbsent         true: only if no job has the id, else
     *                                    IdTakenException; false: replace (1.x)
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when the id is taken (nothing was written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function schedule(
        Message $message,
        int|float $delay,
        int|float $readyMaxLifetime = self::DEFAULT_READY_MAX_LIFETIME,
        bool $ifAbsent = false,
    ): bool {
        return $this->pushOne(Calls::job($this->keys, $message, $delay, $readyMaxLifetime), $ifAbsent);
    }

    /**
     * The short form of {@see schedule()}: a job from its parts, with the
     * default ready_max_lifetime (7 days).
     *
     *     $client->pushTo('order', 'order:43:close', 1.5, '{"order":43}');
     *
     * @param int|float $delay seconds, 0 to 315360000, fractions allowed
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when the id is taken (nothing was written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pushTo(string $topic, string|int $id, int|float $delay, string $body = '', bool $ifAbsent = false): bool
    {
        $message = Message::create(Validator::name('id', $id), $topic, $body);
        return $this->schedule($message, $delay, self::DEFAULT_READY_MAX_LIFETIME, $ifAbsent);
    }

    /**
     * Schedules many jobs in pipelined round trips: push_many.lua takes 100
     * jobs per call, 10 calls go per round trip. The jobs of one call are
     * atomic together; the batch as a whole is not. Every job is validated
     * before anything is sent.
     *
     * Each item is a {@see ScheduledMessage}, or a list
     * [Message $message, int|float $delay] or
     * [Message $message, int|float $delay, int $readyMaxLifetime].
     *
     * Ids are global across topics, as in {@see push()}: by default a taken
     * id's job is replaced (also by a later item of the same batch). With
     * `ifAbsent: true` the jobs whose id is taken are not written, the others
     * are, and then IdTakenException lists the taken ids and carries the due
     * time of every job written.
     *
     * @param iterable<ScheduledMessage|array{0: Message, 1: int|float, 2?: int}> $messagesWithDelays
     * @param bool $ifAbsent true: write only the jobs whose id no job has; false: replace (1.x)
     * @return int the number of jobs pushed
     * @throws InvalidArgumentException on a bad item (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when ids were taken (after the others were written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pushMany(iterable $messagesWithDelays, bool $ifAbsent = false): int
    {
        $jobs = [];
        foreach ($messagesWithDelays as $index => $item) {
            if (\is_array($item)) {
                $count = \count($item);
                if (!array_is_list($item) || $count < 2 || $count > 3 || !$item[0] instanceof Message
                    || !(\is_int($item[1]) || \is_float($item[1]))
                    || ($count === 3 && !(\is_int($item[2]) || \is_float($item[2])))
                ) {
                    throw new InvalidArgumentException(sprintf(
                        'pushMany item %s: expected a ScheduledMessage or [Message, delay(, readyMaxLifetime)]',
                        var_export($index, true)
                    ));
                }
                $item = new ScheduledMessage($item[0], $item[1], $item[2] ?? self::DEFAULT_READY_MAX_LIFETIME);
            }
            if (!$item instanceof ScheduledMessage) {
                throw new InvalidArgumentException(sprintf(
                    'pushMany item %s: expected a ScheduledMessage or [Message, delay(, readyMaxLifetime)], got %s',
                    var_export($index, true),
                    get_debug_type($item)
                ));
            }
            try {
                $jobs[] = Calls::job($this->keys, $item->message, $item->delay, $item->readyMaxLifetime);
            } catch (InvalidArgumentException $e) {
                throw new InvalidArgumentException(
                    sprintf('pushMany item %s: %s', var_export($index, true), $e->getMessage()),
                    0,
                    $e
                );
            }
        }
        $dues = array_fill(0, \count($jobs), null);
        $taken = [];
        $topics = []; // the topics written: a durable push waits on each one's node
        foreach (array_chunk(Calls::pushMany($this->keys, $jobs, $ifAbsent), Scripts::PUSH_MANY_CALLS_PER_PIPELINE) as $pipeline) {
            foreach ($this->connection->pipelined(Scripts::PUSH_MANY, $pipeline) as $i => $reply) {
                $indexes = $pipeline[$i][2];
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
     * Moves the due time of a job still waiting in the pool to $delay
     * seconds from now (Redis's clock); its expiry moves by as much, so it
     * keeps the same lifetime after its due time. Never creates or
     * resurrects a job: a job that is ready, reserved, dead, gone or unknown
     * is left alone.
     *
     * @param int|float   $delay seconds, 0 to 315360000, rounded to the millisecond
     * @param string|null $topic the job's topic: needed in the per-topic layout
     *                           (ids are per topic there), checked and not
     *                           needed in the classic one
     * @return float|false the new due time in Unix seconds (ms precision), or
     *                     false when the job is not waiting
     * @throws InvalidArgumentException on a bad id, delay or topic, or no topic
     *                                  in the per-topic layout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function reschedule(string $id, int|float $delay, ?string $topic = null): float|false
    {
        $id = Validator::name('id', $id);
        $delayMs = Validator::delayMs($delay);
        $topic = $this->keys->idTopic($topic, 'reschedule', 'reschedule($id, $delay, $topic)');
        $reply = $this->connection->script(...Calls::reschedule($this->keys, $id, $delayMs, $topic));
        return Replies::reschedule($reply);
    }

    /**
     * push.lua for one job of Calls::job().
     *
     * @param array{0: list<string>, 1: list<string>} $job
     */
    private function pushOne(array $job, bool $ifAbsent): bool
    {
        $due = Replies::push($this->connection->script(...Calls::push($this->keys, $job, $ifAbsent)), $job[1][0]);
        if ($due instanceof Taken) {
            throw new IdTakenException([$due], [null]);
        }
        $this->awaitReplica(1, [$job[1][1]]);
        return true;
    }

    /**
     * With the durable option: WAIT for a replica to have the writes just
     * made on this connection (on a cluster, on the node of each topic
     * written).
     *
     * @param list<string> $topics the topics written
     * @throws NotReplicatedException when none did in time
     */
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
