<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The wait of bPop() and bReserve(): block, try, and block again within one timeout. A wake that finds
 * nothing usable (another worker was quicker) must not restart the timeout, nor a remainder be sent as 0 (forever).
 *
 * @internal used by {@see LegacyApi} and {@see Reservations}; its clock by
 *           {@see Connection}, {@see Job} and {@see Worker}
 */
final class BlockingWait
{
    /**
     * Calls $attempt with the time left (0 = forever) until it returns a job (false: woke to nothing usable;
     * null: its wait timed out) or the timeout passed.
     *
     * @template T of object
     * @param \Closure(float): (T|false|null) $attempt
     * @return T|false
     */
    public static function until(float $timeout, \Closure $attempt): object|false
    {
        $forever = $timeout == 0.0;
        $deadline = self::now() + $timeout;
        while ($forever || ($left = $deadline - self::now()) > 0) {
            // under 1 ms is sent as 1 ms: "0" would mean forever
            $result = $attempt($forever ? 0.0 : max($left, 0.001));
            if ($result === null && !$forever) {
                return false;
            }
            if ($result !== null && $result !== false) {
                return $result;
            }
        }
        return false;
    }

    /** @internal monotonic seconds (hrtime), the one clock of this SDK's waits and deadlines */
    public static function now(): float
    {
        return hrtime(true) / 1e9;
    }
}
