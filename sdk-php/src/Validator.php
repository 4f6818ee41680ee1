<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * The protocol's input rules (docs/PROTOCOL.md, "Input rules"), checked before
 * any Redis call, with the messages the conformance suite compares across SDKs.
 *
 * @internal used by {@see Client}
 */
final class Validator
{
    /** Longest delay and ready_max_lifetime: 10 years, in seconds. */
    public const MAX_SECONDS = 315360000;

    /** Highest max_attempts (0 means no limit). */
    public const MAX_MAX_ATTEMPTS = 1000000;

    /** Most dead letters listed per call (one call must not hold Redis long). */
    public const MAX_DEAD_COUNT = 1000;

    /** Largest cursor or start of a listing: 2^53 - 1, exact in the scripts' arithmetic. */
    public const MAX_POSITION = 9007199254740991;

    /** An id or a topic: any non-empty string, as 1.x wrote them; an int is its decimal string. */
    public static function name(string $what, mixed $value): string
    {
        if (\is_int($value)) {
            return (string) $value;
        }
        if (!\is_string($value)) {
            throw new InvalidArgumentException(sprintf('%s must be a string or an int, got %s', $what, get_debug_type($value)));
        }
        if ($value === '') {
            throw new InvalidArgumentException(sprintf('%s must not be empty', $what));
        }
        return $value;
    }

    /** Seconds as mix/delayer-client 1.x took them: an int, a float or a numeric string. */
    public static function legacySeconds(string $what, mixed $value): int|float
    {
        if (\is_string($value) && is_numeric($value)) {
            $value = $value + 0;
        }
        if (!\is_int($value) && !\is_float($value)) {
            $shown = \is_string($value) ? var_export($value, true) : get_debug_type($value);
            throw new InvalidArgumentException("{$what} must be a number of seconds, got {$shown}");
        }
        return $value;
    }

    /** A delay in seconds (0 to MAX_SECONDS, fractions allowed) in whole milliseconds, rounded to the nearest. */
    public static function delayMs(int|float $delay, string $what = 'delay'): int
    {
        if (\is_float($delay) && !is_finite($delay)) {
            throw new InvalidArgumentException("{$what} must be a finite number of seconds");
        }
        if ($delay < 0 || $delay > self::MAX_SECONDS) {
            throw new InvalidArgumentException(sprintf('%s must be between 0 and %d seconds, got %s', $what, self::MAX_SECONDS, var_export($delay, true)));
        }
        if (\is_int($delay)) {
            return $delay * 1000;
        }
        // As docs/PROTOCOL.md (Rust's Duration: 1.2345 s is 1235 ms): to the ns, then the ms, halves up;
        // whole seconds split off to keep the fraction's precision; floor(x + 0.5), as round() pre-rounds.
        $whole = floor($delay);
        $nanos = (int) floor(($delay - $whole) * 1e9 + 0.5);
        return (int) $whole * 1000 + intdiv($nanos + 500000, 1000000);
    }

    /** A ready_max_lifetime in whole seconds (1 to MAX_SECONDS), in milliseconds. */
    public static function lifetimeMs(int $readyMaxLifetime): int
    {
        if ($readyMaxLifetime < 1 || $readyMaxLifetime > self::MAX_SECONDS) {
            throw new InvalidArgumentException(sprintf('readyMaxLifetime must be between 1 and %d seconds, got %d', self::MAX_SECONDS, $readyMaxLifetime));
        }
        return $readyMaxLifetime * 1000;
    }

    /** A blocking wait in seconds: 0 (forever) or more. */
    public static function timeout(int|float $timeout): float
    {
        if ((\is_float($timeout) && !is_finite($timeout)) || $timeout < 0) {
            throw new InvalidArgumentException('timeout must be 0 (wait forever) or a positive number of seconds, got ' . var_export($timeout, true));
        }
        return (float) $timeout;
    }

    /** A time-to-run: a delay of at least 1 ms after rounding (0 would hand the job out and take it back at once). */
    public static function ttrMs(int|float $ttr): int
    {
        if ($ttr <= 0) { // NaN is not <= 0: delayMs() refuses it
            throw new InvalidArgumentException(sprintf('ttr must be more than 0 seconds, got %s', var_export($ttr, true)));
        }
        $ms = self::delayMs($ttr, 'ttr');
        if ($ms < 1) {
            throw new InvalidArgumentException(sprintf('ttr must be at least 1 ms after rounding to the millisecond, got %s s', var_export($ttr, true)));
        }
        return $ms;
    }

    /** max_attempts: 0 (no limit) to MAX_MAX_ATTEMPTS. */
    public static function maxAttempts(int $maxAttempts): int
    {
        if ($maxAttempts < 0 || $maxAttempts > self::MAX_MAX_ATTEMPTS) {
            $max = self::MAX_MAX_ATTEMPTS;
            throw new InvalidArgumentException("maxAttempts must be an integer from 0 (no limit) to {$max}, got {$maxAttempts}");
        }
        return $maxAttempts;
    }

    /** A listing's position ($what: a cursor, a start): 0 to MAX_POSITION. */
    public static function position(string $what, int $value): void
    {
        if ($value < 0 || $value > self::MAX_POSITION) {
            throw new InvalidArgumentException(sprintf('%s must be 0 to %d, got %d', $what, self::MAX_POSITION, $value));
        }
    }

    /** A dead-letter listing window: start 0 to MAX_POSITION, count 1 to MAX_DEAD_COUNT. */
    public static function deadRange(int $start, int $count): void
    {
        self::position('dead-letter start', $start);
        if ($count < 1 || $count > self::MAX_DEAD_COUNT) {
            throw new InvalidArgumentException(sprintf('dead letters are listed 1 to %d at a time, got a count of %d', self::MAX_DEAD_COUNT, $count));
        }
    }

    /**
     * @param array<mixed> $ids
     * @return list<string> each by the rules of {@see name()}
     */
    public static function ids(array $ids): array
    {
        $checked = [];
        foreach ($ids as $key => $id) {
            $checked[] = self::name(sprintf('ids[%s]', var_export($key, true)), $id);
        }
        return $checked;
    }
}
