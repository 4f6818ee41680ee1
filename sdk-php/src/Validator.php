<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * The protocol's input rules (docs/PROTOCOL.md, "Input rules"), checked
 * before any Redis call. Every violation raises
 * {@see InvalidArgumentException}.
 *
 * @internal used by {@see Client}; not part of the public API.
 */
final class Validator
{
    /** Longest id or topic, in bytes. */
    public const MAX_NAME_BYTES = 200;

    /** Longest delay and ready_max_lifetime: 10 years, in seconds. */
    public const MAX_SECONDS = 315360000;

    private function __construct()
    {
    }

    /**
     * An id or a topic: 1 to 200 bytes of UTF-8, no whitespace (Unicode
     * White_Space), no control character (Cc), no "{" or "}".
     *
     * @param string $what "id" or "topic", for the message
     * @throws InvalidArgumentException
     */
    public static function name(string $what, string $value): string
    {
        $len = \strlen($value);
        if ($len === 0 || $len > self::MAX_NAME_BYTES) {
            throw new InvalidArgumentException(sprintf(
                '%s must be 1 to %d bytes long, got %d bytes',
                $what,
                self::MAX_NAME_BYTES,
                $len
            ));
        }
        if (!mb_check_encoding($value, 'UTF-8')) {
            throw new InvalidArgumentException(sprintf('%s must be valid UTF-8', $what));
        }
        // \p{Z} + \p{Cc} is exactly Unicode White_Space plus the control characters.
        if (preg_match('/[\p{Z}\p{Cc}{}]/u', $value) !== 0) {
            throw new InvalidArgumentException(sprintf(
                '%s %s must not contain whitespace, control characters, "{" or "}"',
                $what,
                json_encode($value, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES)
            ));
        }
        return $value;
    }

    /**
     * A delay in seconds (0 to 315360000, fractions allowed), returned in
     * whole milliseconds, rounded to the nearest.
     *
     * @throws InvalidArgumentException
     */
    public static function delayMs(int|float $delay): int
    {
        if (\is_float($delay) && !is_finite($delay)) {
            throw new InvalidArgumentException('delay must be a finite number of seconds');
        }
        if ($delay < 0 || $delay > self::MAX_SECONDS) {
            throw new InvalidArgumentException(sprintf(
                'delay must be between 0 and %d seconds, got %s',
                self::MAX_SECONDS,
                var_export($delay, true)
            ));
        }
        if (\is_int($delay)) {
            return $delay * 1000;
        }
        // As docs/PROTOCOL.md: to the nearest nanosecond, then to the
        // millisecond, halves up (Rust's Duration semantics: 1.2345 s is
        // 1235 ms). Whole seconds split off exactly, so the fraction keeps
        // its precision on huge delays; floor(x + 0.5), not round(), which
        // pre-rounds.
        $whole = floor($delay);
        $nanos = (int) floor(($delay - $whole) * 1e9 + 0.5);
        return (int) $whole * 1000 + intdiv($nanos + 500000, 1000000);
    }

    /**
     * A ready_max_lifetime in whole seconds (1 to 315360000), returned in
     * milliseconds.
     *
     * @throws InvalidArgumentException
     */
    public static function lifetimeMs(int $readyMaxLifetime): int
    {
        if ($readyMaxLifetime < 1 || $readyMaxLifetime > self::MAX_SECONDS) {
            throw new InvalidArgumentException(sprintf(
                'readyMaxLifetime must be between 1 and %d seconds, got %d',
                self::MAX_SECONDS,
                $readyMaxLifetime
            ));
        }
        return $readyMaxLifetime * 1000;
    }

    /**
     * A bPop timeout in seconds: 0 (wait forever) or more, fractions allowed.
     *
     * @throws InvalidArgumentException
     */
    public static function timeout(int|float $timeout): float
    {
        if ((\is_float($timeout) && !is_finite($timeout)) || $timeout < 0) {
            throw new InvalidArgumentException(sprintf(
                'timeout must be 0 (wait forever) or a positive number of seconds, got %s',
                var_export($timeout, true)
            ));
        }
        return (float) $timeout;
    }
}
