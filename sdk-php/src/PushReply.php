<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ProtocolException;

/**
 * What push.lua and push_many.lua answer for one job: the due time written,
 * or, under the "absent" policy, [topic, due] of the job that holds the id.
 * Kept apart from the client so push() and pushMany() read it alike.
 *
 * @internal
 */
final class PushReply
{
    private function __construct()
    {
    }

    /**
     * @param mixed  $entry  the script's answer for the job
     * @param string $id     the job's id
     * @param string $script the script's name, for errors
     * @return float|Taken the due time in Unix seconds, or the id's holder
     * @throws ProtocolException on an answer of another shape
     */
    public static function read(mixed $entry, string $id, string $script): float|Taken
    {
        if (\is_string($entry) && is_numeric($entry)) {
            return (float) $entry;
        }
        if (\is_array($entry) && \count($entry) === 2 && \is_string($entry[0] ?? null)
            && \is_string($entry[1] ?? null) && ($entry[1] === '' || is_numeric($entry[1]))
        ) {
            return new Taken($id, $entry[0], $entry[1] === '' ? null : (float) $entry[1]);
        }
        throw new ProtocolException("unexpected reply from {$script}.lua: " . get_debug_type($entry));
    }
}
