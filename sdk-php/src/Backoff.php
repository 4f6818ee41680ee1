<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * How long a reserved job waits before its next attempt after a failed one,
 * given with {@see Message::withBackoff()}; without one, exponential from 1 s
 * up to 1 h (reserve.lua's defaults, so they have a single home).
 */
final class Backoff
{
    /** The kinds sent to push.lua. */
    public const FIXED = 'fixed';
    public const EXPONENTIAL = 'exponential';

    /**
     * @param self::FIXED|self::EXPONENTIAL $kind
     * @param int $backoffMs    fixed: the wait; exponential: the first wait (backoff_ms)
     * @param int $backoffMaxMs the longest wait (backoff_max_ms; equal to $backoffMs when fixed)
     */
    private function __construct(
        public readonly string $kind,
        public readonly int $backoffMs,
        public readonly int $backoffMaxMs,
    ) {
    }

    /**
     * Always the same wait.
     *
     * @param int|float $delay seconds, 0 to 315360000, rounded to the millisecond
     * @throws InvalidArgumentException out of range
     */
    public static function fixed(int|float $delay): self
    {
        $ms = Validator::delayMs($delay, 'fixed backoff');
        return new self(self::FIXED, $ms, $ms);
    }

    /**
     * $base after the first failure, doubled after each further one, never more than $max.
     *
     * @param int|float $base seconds, 0 to 315360000, rounded to the millisecond
     * @param int|float $max  seconds, same rules, not below $base (after rounding)
     * @throws InvalidArgumentException out of range
     */
    public static function exponential(int|float $base, int|float $max): self
    {
        $baseMs = Validator::delayMs($base, 'exponential backoff base');
        $maxMs = Validator::delayMs($max, 'exponential backoff max');
        if ($maxMs < $baseMs) {
            [$max, $base] = [var_export($max, true), var_export($base, true)];
            throw new InvalidArgumentException("exponential backoff: the max ({$max} s) is below the base ({$base} s)");
        }
        return new self(self::EXPONENTIAL, $baseMs, $maxMs);
    }
}
