<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The wait of bPop() and bReserve(): claim, block, claim again within one timeout. A wake that finds
 * nothing usable (another worker was quicker) must not restart the timeout, nor a remainder be sent as 0 (forever).
 * A claim may answer a wait instruction (its topic is paused): then the wait blocks on the key it names,
 * which a resume writes, for at most the time it gives, and claims again (docs/design/flow-control.md §3.2).
 *
 * @internal used by {@see LegacyApi} and {@see Reservations}; its clock by
 *           {@see Connection}, {@see Job} and {@see Worker}
 */
final class BlockingWait
{
    /**
     * Claims first ($claim: a job, false for none, or {@see Replies::wait()}'s [gate, seconds]) so that a
     * waiter takes no id of a paused topic; on none calls $block with the time left (0 = forever), which
     * blocks on the ready list and claims (null: its wait timed out). Ends with a job or false at the timeout.
     *
     * $again (default $claim) claims after a gate's wait: a caller that has just claimed passes a
     * $claim that answers false, so the wait starts by blocking.
     *
     * @template T of object
     * @param \Closure(): (T|false|array{0: string, 1: float}) $claim
     * @param \Closure(float): (T|false|null|array{0: string, 1: float}) $block
     * @param (\Closure(): (T|false|array{0: string, 1: float}))|null $again
     * @return T|false
     */
    public static function until(float $timeout, RedisLink $link, \Closure $claim, \Closure $block, ?\Closure $again = null): object|false
    {
        $forever = $timeout == 0.0;
        $deadline = self::now() + $timeout;
        $again ??= $claim;
        $result = $claim();
        while (!\is_object($result)) {
            $left = $forever ? 0.0 : $deadline - self::now();
            if (!$forever && $left <= 0) {
                return false;
            }
            if (\is_array($result)) {
                // paused: a resume wakes every waiter at once; the recheck is a safety net
                [$gate, $recheck] = $result;
                $slice = $forever ? $recheck : min(max($left, 0.001), $recheck);
                if ($link->blocking('BRPOPLPUSH', [$gate, $gate], $slice) === null && $slice < $recheck) {
                    return false; // the whole remainder waited
                }
                $result = $again();
                continue;
            }
            // under 1 ms is sent as 1 ms: "0" would mean forever
            $result = $block($forever ? 0.0 : max($left, 0.001));
            if ($result === null && !$forever) {
                return false;
            }
        }
        return $result;
    }

    /** @internal monotonic seconds (hrtime), the one clock of this SDK's waits and deadlines */
    public static function now(): float
    {
        return hrtime(true) / 1e9;
    }
}
