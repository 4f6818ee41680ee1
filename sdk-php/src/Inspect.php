<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/** Seeing jobs, read-only (docs/PROTOCOL.md, "Inspecting jobs"). */
trait Inspect
{
    /**
     * Where job $id of $topic is ({@see JobInfo::STATES}) and what it carries.
     *
     * @throws InvalidArgumentException on an empty topic or id
     */
    public function job(string $topic, string|int $id): JobInfo
    {
        $topic = $this->keys->topic($topic);
        $id = Validator::name('id', $id);
        return Replies::lookup($this->connection->script(...Calls::lookup($this->keys, $topic, $id)), $id);
    }

    /**
     * A page of $topic's scheduled jobs, earliest due first, from $cursor (0, then the page's next).
     *
     * @return Page<Listed>
     * @throws InvalidArgumentException on an empty topic, a negative cursor or a count outside 1..1000
     */
    public function listScheduled(string $topic, int $cursor = 0, int $count = 100): Page
    {
        return $this->inspectScan(false, $topic, $cursor, $count);
    }

    /**
     * A page of $topic's reserved jobs, earliest deadline first ($time: the deadline).
     *
     * @return Page<Listed>
     * @throws InvalidArgumentException as listScheduled()
     */
    public function listReserved(string $topic, int $cursor = 0, int $count = 100): Page
    {
        return $this->inspectScan(true, $topic, $cursor, $count);
    }

    /**
     * A page of the ids in $topic's ready queue, next out first.
     *
     * @return Page<string>
     * @throws InvalidArgumentException as listScheduled()
     */
    public function listReady(string $topic, int $cursor = 0, int $count = 100): Page
    {
        $topic = $this->inspectPageArgs($topic, $cursor, $count);
        [$next, $pairs] = Replies::list($this->connection->script(...Calls::list($this->keys, $topic, 'ready', $cursor, $count, 1)));
        return new Page(array_map(static fn (array $p): string => $p[0], $pairs), $next);
    }

    /** Scheduled, ready, reserved and dead jobs per topic, and each topic's pause and rate limit; no scan of the pool. */
    public function stats(): Stats
    {
        if ($this->keys->isPerTopic()) {
            return $this->perTopicStats();
        }
        return Replies::stats($this->connection->script(...Calls::stats($this->keys)));
    }

    /**
     * The per-topic layout's numbers: ZCARD / LLEN of each topic's keys, its flow hash's `paused`, `per_second`
     * and `burst`, and the jobs of its pool due by this client's clock (held while paused or limited: they wait
     * in the pool, as flow_topic.lua counts them), 100 topics per round trip. A flow hash of the wrong type reads
     * as paused, since unknown, and no limit (stats.lua's "?", "", ""): then that chunk's hashes are read one
     * by one.
     */
    private function perTopicStats(): Stats
    {
        $topics = [];
        $cursor = '0';
        do {
            [$reply] = $this->connection->commands([['SSCAN', [$this->keys->topics(), $cursor, 'COUNT', '1000']]]);
            if (!\is_array($reply) || \count($reply) !== 2 || !\is_array($reply[1] ?? null)) {
                throw new ProtocolException('unexpected reply from SSCAN: ' . get_debug_type($reply));
            }
            $cursor = (string) Replies::text($reply[0]);
            foreach ($reply[1] as $topic) {
                $topics[] = (string) Replies::text($topic);
            }
        } while ($cursor !== '0');
        $topics = array_values(array_unique($topics));
        sort($topics, SORT_STRING);
        $out = [];
        $poolTotal = 0;
        $reservedTotal = 0;
        $now = sprintf('%.3F', microtime(true));
        foreach (array_chunk($topics, 100) as $chunk) {
            $counts = [];
            $flows = [];
            foreach ($chunk as $topic) {
                $n = $this->keys->names($topic);
                $flows[] = ['HMGET', [(string) $n->flow, 'paused', 'per_second', 'burst']];
                array_push($counts, ['ZCARD', [$n->pool]], ['LLEN', [(string) $n->ready]], ['ZCARD', [$n->reserved]], ['LLEN', [(string) $n->dead]],
                    ['ZCOUNT', [$n->pool, '-inf', $now]]);
            }
            try {
                $replies = $this->connection->commands([...$counts, ...$flows]);
                $flow = \array_slice($replies, \count($counts));
            } catch (RedisErrorException $e) {
                if (!str_contains($e->getMessage(), 'WRONGTYPE')) {
                    throw $e;
                }
                $replies = $this->connection->commands($counts); // a counted key of the wrong type: an error, as before
                $flow = array_map(fn (array $hmget): mixed => $this->flowOrUnknown($hmget), $flows);
            }
            foreach ($chunk as $i => $topic) {
                [$scheduled, $ready, $reserved, $dead, $due] = array_map(
                    static fn (mixed $v): int => Replies::int($v),
                    \array_slice($replies, 5 * $i, 5)
                );
                [$pausedField, $perSecond, $burst] = \is_array($flow[$i]) && \count($flow[$i]) === 3
                    ? array_values($flow[$i]) : throw new ProtocolException('unexpected reply from HMGET: ' . get_debug_type($flow[$i]));
                // an empty `paused` stops the topic all the same (the scripts test the field), its time unknown:
                // stats.lua's "?"; a `per_second` of any value limits it, as flow_topic.lua and lookup.lua read it
                [$isPaused, $since] = Replies::pausedSince($pausedField === '' ? '?' : $pausedField);
                $limited = $perSecond !== false && $perSecond !== null;
                $poolTotal += $scheduled;
                $reservedTotal += $reserved;
                $out[] = new TopicStats($topic, $scheduled, $ready, $reserved, $dead, $isPaused, $since, $isPaused || $limited ? $due : 0,
                    Replies::rateLimit($perSecond, $burst));
            }
        }
        return new Stats($poolTotal, $reservedTotal, $out);
    }

    /**
     * @param array{0: string, 1: list<string>} $hmget one flow hash's HMGET
     * @return mixed its reply; for a key of the wrong type ["?", nil, nil], paused since unknown and no limit
     */
    private function flowOrUnknown(array $hmget): mixed
    {
        try {
            return $this->connection->commands([$hmget])[0];
        } catch (RedisErrorException $e) {
            if (!str_contains($e->getMessage(), 'WRONGTYPE')) {
                throw $e;
            }
            return ['?', false, false];
        }
    }

    /** @return Page<Listed> list.lua until the page is full, the end, or Page::CALLS_PER_PAGE calls */
    private function inspectScan(bool $reserved, string $topic, int $cursor, int $count): Page
    {
        $topic = $this->inspectPageArgs($topic, $cursor, $count);
        $items = [];
        $rank = $cursor;
        for ($call = 0; $call < Page::CALLS_PER_PAGE; $call++) {
            $list = Calls::list($this->keys, $topic, $reserved ? 'reserved' : 'scheduled', $rank, $count - \count($items), Page::EXAMINE_PER_CALL);
            [$next, $pairs] = Replies::list($this->connection->script(...$list));
            foreach ($pairs as [$id, $time]) {
                $items[] = new Listed($id, $time ?? 0.0);
            }
            if ($next === null || \count($items) >= $count) {
                return new Page($items, $next);
            }
            $rank = $next;
        }
        return new Page($items, $rank);
    }

    private function inspectPageArgs(string $topic, int $cursor, int $count): string
    {
        $topic = $this->keys->topic($topic);
        Validator::position('cursor', $cursor);
        if ($count < 1 || $count > Page::MAX_ITEMS) {
            throw new InvalidArgumentException(sprintf('listings take 1 to %d entries at a time, got %d', Page::MAX_ITEMS, $count));
        }
        return $topic;
    }
}
