<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ProtocolException;

/**
 * The per-topic layout's index write as calls and replies, without I/O
 * (docs/PROTOCOL.md, "The index write"): what {@see TopicIndex} sends after
 * a per-topic call, and a push's estimate and follow-up. Apart from the
 * calls ({@see Calls}) because it is the choreography the scripts' own
 * announcements replace.
 *
 * @internal used by {@see Client}
 */
final class Ops
{
    private function __construct()
    {
    }

    /**
     * The index write after a per-topic call that scheduled or reserved
     * (docs/PROTOCOL.md, "The index write"): ZADD <prefix>due LT CH <time>
     * <topic>, and for pushes SADD <prefix>topics <topic>; sent as one
     * pipeline. $time is the call's earliest time as the script answered
     * it ("s.mmm"), or "0" after a requeue.
     *
     * @return list<array{0: string, 1: list<string>}> commands and their arguments
     */
    public static function indexWrite(Keys $keys, string $topic, string $time, bool $pushed): array
    {
        $commands = [['ZADD', [$keys->due(), 'LT', 'CH', $time, $topic]]];
        if ($pushed) {
            $commands[] = ['SADD', [$keys->topics(), $topic]];
        }
        return $commands;
    }

    /**
     * How much earlier than its due time (ms) a per-topic push's index
     * write sent with the script is: the client's and Redis's clocks may
     * disagree by this much before a push costs a second round trip.
     */
    public const CLOCK_MARGIN_MS = 100;

    /** {@see pushFollowUp()}: the index write again, with the answered due time. */
    public const WRITE_AGAIN = 'write';

    /** {@see pushFollowUp()}: only the wake message, with the answered due time. */
    public const WAKE = 'wake';

    /**
     * The time of a per-topic push's index write sent with the script
     * (PROTOCOL.md, "push sends its index write with the script"): this
     * machine's clock plus the delay, {@see CLOCK_MARGIN_MS} early, "s.mmm"
     * like the scripts' times.
     *
     * @param float $now Unix seconds (microtime(true))
     */
    public static function pushEstimate(int $delayMs, float $now): string
    {
        $ms = (int) floor($now * 1000) + $delayMs - self::CLOCK_MARGIN_MS;
        return sprintf('%d.%03d', intdiv($ms, 1000), $ms % 1000);
    }

    /**
     * What a per-topic push does once push.lua answered $answered, after
     * sending its index write with $early: {@see WRITE_AGAIN} when the
     * estimate came out later (the clocks disagree by more than the margin),
     * else {@see WAKE} when that write lowered the index, or may have (the
     * pipeline was sent again after NOSCRIPT, $resent), else null.
     */
    public static function pushFollowUp(string $early, string $answered, bool $lowered, bool $resent): ?string
    {
        if ((int) round((float) $early * 1000) > (int) round((float) $answered * 1000)) {
            return self::WRITE_AGAIN;
        }
        return $lowered || $resent ? self::WAKE : null;
    }

    /**
     * Whether the index write lowered the topic's time (ZADD LT CH answered
     * 1): only then is the time published on the wake channel. Null (ZADD
     * refused) did not.
     *
     * @param list<mixed> $replies
     * @throws ProtocolException
     */
    public static function indexLowered(array $replies): bool
    {
        $zadd = $replies[0] ?? null;
        if ($zadd === null) { // refused: a hint (TopicIndex::heard())
            return false;
        }
        if ($zadd !== 0 && $zadd !== 1) {
            throw new ProtocolException('unexpected reply from ZADD LT CH: ' . get_debug_type($zadd));
        }
        return $zadd === 1;
    }

    /**
     * PUBLISH <prefix>wake <time>, after a lowered index (a sleeping server
     * wakes for it).
     *
     * @return list<array{0: string, 1: list<string>}>
     */
    public static function wake(Keys $keys, string $time): array
    {
        return [['PUBLISH', [$keys->wake(), $time]]];
    }

    /**
     * The earliest of some "s.mmm" times, as given (compared as numbers).
     *
     * @param list<string> $times not empty
     */
    public static function earliest(array $times): string
    {
        $best = $times[0];
        foreach ($times as $time) {
            if ((float) $time < (float) $best) {
                $best = $time;
            }
        }
        return $best;
    }
}
