<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * Seeing every job: where one job is ({@see job()}), pages of a topic's
 * scheduled, ready and reserved jobs, and per-topic numbers ({@see stats()}).
 *
 * So that "was order 42's auto-close scheduled, and when does it fire?"
 * needs no redis-cli and no knowledge of the keys. Everything here only
 * reads, with lookup.lua, list.lua and stats.lua (their headers, and
 * docs/PROTOCOL.md "Inspecting jobs", say what they take and return). Used
 * by {@see Client}, whose connection and keys it reads.
 */
trait Inspect
{
    /**
     * Where job $id of $topic is, and what it carries: scheduled (with its
     * due time), ready, reserved (with its deadline), dead (why and when),
     * malformed, or unknown (also a job of another topic).
     *
     * @throws InvalidArgumentException on an empty topic or id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function job(string $topic, string|int $id): JobInfo
    {
        $topic = Validator::topic($topic, $this->keys->isPerTopic());
        $id = Validator::name('id', $id);
        $n = $this->keys->names($this->keys->isPerTopic() ? $topic : null);
        $keys = [$n->bucket($id), $n->pool, $n->reserved];
        $reply = $this->connection->script(Scripts::LOOKUP, $keys, [$id, $topic]);
        if (!\is_array($reply) || \count($reply) !== 9) {
            throw new ProtocolException('unexpected reply from lookup.lua: ' . get_debug_type($reply));
        }
        $f = array_map(static fn (mixed $v): ?string => self::inspectText($v), array_values($reply));
        $state = $f[0] ?? '';
        if (!\in_array($state, JobInfo::STATES, true)) {
            throw new ProtocolException("lookup.lua: unknown state {$state}");
        }
        $time = self::inspectTime($f[5]);
        return new JobInfo(
            $id,
            $state,
            $f[1],
            self::inspectCount($f[2]),
            self::inspectCount($f[3]),
            self::inspectCount($f[4]),
            $state === 'scheduled' ? $time : null,
            $state === 'reserved' ? $time : null,
            $state === 'dead' ? $time : null,
            $f[6],
            $f[7],
            Traceparent::fromRedis($id, array_values($reply)[8]),
        );
    }

    /**
     * A page of $topic's scheduled jobs, earliest due first, from $cursor (0,
     * then the page's next).
     *
     * @return Page<Listed>
     * @throws InvalidArgumentException on an empty topic, a negative cursor or a count outside 1..1000
     * @throws ConnectionException|RedisErrorException|ProtocolException
     */
    public function listScheduled(string $topic, int $cursor = 0, int $count = 100): Page
    {
        return $this->inspectScan(false, $topic, $cursor, $count);
    }

    /**
     * A page of $topic's reserved jobs, earliest deadline first ($time: the deadline).
     *
     * @return Page<Listed>
     * @throws InvalidArgumentException|ConnectionException|RedisErrorException|ProtocolException
     */
    public function listReserved(string $topic, int $cursor = 0, int $count = 100): Page
    {
        return $this->inspectScan(true, $topic, $cursor, $count);
    }

    /**
     * A page of the ids in $topic's ready queue, next out first.
     *
     * @return Page<string>
     * @throws InvalidArgumentException|ConnectionException|RedisErrorException|ProtocolException
     */
    public function listReady(string $topic, int $cursor = 0, int $count = 100): Page
    {
        $topic = $this->inspectPageArgs($topic, $cursor, $count);
        $ready = (string) $this->keys->names($topic)->ready;
        $reply = $this->connection->script(Scripts::LIST, [$ready], ['', $topic, (string) $cursor, (string) $count, '1', 'ready']);
        [$next, $pairs] = self::inspectListReply($reply);
        return new Page(array_map(static fn (array $p): string => $p[0], $pairs), $next);
    }

    /**
     * Scheduled, ready, reserved and dead jobs per topic. Cheap on any
     * backlog: no scan of the pool. In the per-topic layout, the topics of
     * `<prefix>topics` with the sizes of their own keys (reserved counts
     * always known).
     *
     * @throws ConnectionException|RedisErrorException|ProtocolException
     */
    public function stats(): Stats
    {
        if ($this->keys->isPerTopic()) {
            return $this->perTopicStats();
        }
        $k = $this->keys;
        $reply = $this->connection->script(
            Scripts::STATS,
            [$k->topics(), $k->scheduledCount(), $k->pool(), $k->reserved()],
            [$k->readyQueuePrefix(), $k->deadPrefix(), $k->bucketPrefix(), (string) Stats::RESERVED_CAP],
        );
        if (!\is_array($reply) || \count($reply) < 3) {
            throw new ProtocolException('unexpected reply from stats.lua: ' . get_debug_type($reply));
        }
        $reply = array_values($reply);
        $known = self::inspectInt($reply[2]) === 1;
        $topics = [];
        foreach (\array_slice($reply, 3) as $entry) {
            if (!\is_array($entry) || \count($entry) !== 5) {
                throw new ProtocolException('unexpected topic entry from stats.lua: ' . get_debug_type($entry));
            }
            [$topic, $scheduled, $ready, $reserved, $dead] = array_values($entry);
            $topics[] = new TopicStats(
                self::inspectText($topic) ?? '',
                self::inspectInt($scheduled),
                self::inspectInt($ready),
                $known ? self::inspectInt($reserved) : null,
                self::inspectInt($dead),
            );
        }
        return new Stats(self::inspectInt($reply[0]), self::inspectInt($reply[1]), $topics);
    }

    /**
     * The per-topic layout's numbers, without a script (docs/PROTOCOL.md,
     * "Operations in the per-topic layout"): the topics of `<prefix>topics`
     * (SSCAN), and for each ZCARD of its pool and reserved set, LLEN of its
     * ready and dead lists, 100 topics per round trip.
     *
     * @throws ConnectionException|RedisErrorException|ProtocolException
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
            $cursor = (string) self::inspectText($reply[0]);
            foreach ($reply[1] as $topic) {
                $topics[] = (string) self::inspectText($topic);
            }
        } while ($cursor !== '0');
        $topics = array_values(array_unique($topics));
        sort($topics, SORT_STRING);
        $out = [];
        $poolTotal = 0;
        $reservedTotal = 0;
        foreach (array_chunk($topics, 100) as $chunk) {
            $commands = [];
            foreach ($chunk as $topic) {
                $n = $this->keys->names($topic);
                array_push(
                    $commands,
                    ['ZCARD', [$n->pool]],
                    ['LLEN', [(string) $n->ready]],
                    ['ZCARD', [$n->reserved]],
                    ['LLEN', [(string) $n->dead]],
                );
            }
            $replies = array_map(static fn (mixed $v): int => self::inspectInt($v), $this->connection->commands($commands));
            foreach ($chunk as $i => $topic) {
                [$scheduled, $ready, $reserved, $dead] = \array_slice($replies, 4 * $i, 4);
                $poolTotal += $scheduled;
                $reservedTotal += $reserved;
                $out[] = new TopicStats($topic, $scheduled, $ready, $reserved, $dead);
            }
        }
        return new Stats($poolTotal, $reservedTotal, $out);
    }

    /**
     * list.lua over the topic's pool or reserved set, call after call until
     * the page is full, the end is reached, or {@see Page::CALLS_PER_PAGE}
     * calls were made.
     *
     * @return Page<Listed>
     */
    private function inspectScan(bool $reserved, string $topic, int $cursor, int $count): Page
    {
        $topic = $this->inspectPageArgs($topic, $cursor, $count);
        $n = $this->keys->names($topic);
        $zset = $reserved ? $n->reserved : $n->pool;
        $items = [];
        $rank = $cursor;
        for ($call = 0; $call < Page::CALLS_PER_PAGE; $call++) {
            $argv = [$n->bucketPrefix, $topic, (string) $rank, (string) ($count - \count($items)), (string) Page::EXAMINE_PER_CALL];
            if ($reserved) {
                $argv[] = 'reserved'; // its scores are ms; list.lua answers in seconds
            }
            [$next, $pairs] = self::inspectListReply($this->connection->script(Scripts::LIST, [$zset], $argv));
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

    /** @throws InvalidArgumentException */
    private function inspectPageArgs(string $topic, int $cursor, int $count): string
    {
        $topic = Validator::topic($topic, $this->keys->isPerTopic());
        Validator::position('cursor', $cursor);
        if ($count < 1 || $count > Page::MAX_ITEMS) {
            throw new InvalidArgumentException(sprintf('listings take 1 to %d entries at a time, got %d', Page::MAX_ITEMS, $count));
        }
        return $topic;
    }

    /**
     * list.lua's {next_rank, id, score, ...}.
     *
     * @return array{0: int|null, 1: list<array{0: string, 1: float|null}>}
     * @throws ProtocolException
     */
    private static function inspectListReply(mixed $reply): array
    {
        if (!\is_array($reply) || \count($reply) % 2 !== 1) {
            throw new ProtocolException('unexpected reply from list.lua: ' . get_debug_type($reply));
        }
        $reply = array_values($reply);
        $pairs = [];
        for ($i = 1; $i < \count($reply); $i += 2) {
            $pairs[] = [self::inspectText($reply[$i]) ?? '', self::inspectTime(self::inspectText($reply[$i + 1]))];
        }
        return [self::inspectCount(self::inspectText($reply[0])), $pairs];
    }

    /** A script's string; null when empty (the scripts' "not known"). */
    private static function inspectText(mixed $value): ?string
    {
        if (\is_int($value)) {
            return (string) $value;
        }
        if ($value === false || $value === null || $value === '') {
            return null;
        }
        if (!\is_string($value)) {
            throw new ProtocolException('expected a string from Redis, got ' . get_debug_type($value));
        }
        return $value;
    }

    private static function inspectCount(?string $value): ?int
    {
        if ($value === null) {
            return null;
        }
        if (!ctype_digit($value)) {
            throw new ProtocolException("expected a count from Redis, got {$value}");
        }
        return (int) $value;
    }

    private static function inspectInt(mixed $value): int
    {
        if (!\is_int($value) || $value < 0) {
            throw new ProtocolException('expected a count from Redis, got ' . get_debug_type($value));
        }
        return $value;
    }

    private static function inspectTime(?string $value): ?float
    {
        if ($value === null) {
            return null;
        }
        if (!is_numeric($value)) {
            throw new ProtocolException("expected a time in Unix seconds, got {$value}");
        }
        return round((float) $value, 3);
    }
}
