<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The wait of bPop() and bReserve(): block, try, and block again within
 * one timeout.
 *
 * Apart because both waits share it exactly and it does no I/O of its own
 * (the caller's $attempt does): a wake that finds nothing usable, a stale
 * id or another worker quicker, must not restart the timeout, and a
 * remainder must never be sent as 0, which Redis reads as forever.
 *
 * @internal used by {@see LegacyApi} and {@see Reservations}
 */
final class BlockingWait
{
    private function __construct()
    {
    }

    /**
     * Calls $attempt with the time left (0 = forever) until it returns a
     * job, or the timeout has passed.
     *
     * $attempt blocks up to the time given, then returns the job; false when
     * it woke but found nothing usable (a stale id, another worker was
     * quicker): the wait goes on within the same timeout; or null when its
     * wait timed out. A remainder under 1 ms is passed as 1 ms, never as 0
     * (which would mean forever).
     *
     * @template T of object
     * @param float $timeout seconds, already validated; 0 waits forever
     * @param \Closure(float): (T|false|null) $attempt
     * @return T|false
     */
    public static function until(float $timeout, \Closure $attempt): object|false
    {
        $forever = $timeout == 0.0;
        $deadline = self::now() + $timeout;
        while (true) {
            $wait = 0.0;
            if (!$forever) {
                $wait = $deadline - self::now();
                if ($wait <= 0) {
                    return false;
                }
                // under 1 ms is sent as 1 ms: "0" would mean forever
                $wait = max($wait, 0.001);
            }
            $result = $attempt($wait);
            if ($result === null) {
                if ($forever) {
                    continue;
                }
                return false;
            }
            if ($result !== false) {
                return $result;
            }
        }
    }

    private static function now(): float
    {
        return hrtime(true) / 1e9;
    }
}
