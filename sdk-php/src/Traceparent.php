<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * Trace context across the delay: a job's W3C `traceparent`, kept by
 * push.lua and handed back by pop, reserve, job() and the Worker, so a
 * consumer's span can be a child of the producer's. Passed through only.
 * Read from Redis it is untrusted: a malformed one is handed out as null
 * and logged once per process, never an error.
 */
final class Traceparent
{
    private const RULE = '/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}\z/';

    private static bool $warned = false;

    private function __construct()
    {
    }

    /** A push's traceparent: null or "" (none), or the W3C form. */
    public static function check(?string $value): ?string
    {
        if ($value === null || $value === '') {
            return null;
        }
        if (preg_match(self::RULE, $value) !== 1) {
            throw new InvalidArgumentException('traceparent must be "00-<32 hex>-<16 hex>-<2 hex>" (lower-case, ids not all zeros), got '
                . var_export(substr($value, 0, 64), true));
        }
        return $value;
    }

    /** The traceparent a script read from job $id's hash ("" when absent): null when absent or malformed. */
    public static function fromRedis(string $id, mixed $value): ?string
    {
        if ($value === '' || $value === null || $value === false) {
            return null;
        }
        if (\is_string($value) && preg_match(self::RULE, $value) === 1) {
            return $value;
        }
        if (!self::$warned) {
            self::$warned = true;
            $shown = \is_string($value) ? substr($value, 0, 64) : get_debug_type($value);
            error_log(sprintf(
                'delayer: warning: job %s carries a traceparent that is not one (%s, %d bytes); it is handed out '
                . 'without it (further malformed traceparents not logged)',
                json_encode($id, JSON_INVALID_UTF8_SUBSTITUTE) ?: '?',
                json_encode($shown, JSON_INVALID_UTF8_SUBSTITUTE) ?: '?',
                \is_string($value) ? \strlen($value) : 0
            ));
        }
        return null;
    }
}
