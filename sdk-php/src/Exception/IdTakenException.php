<?php

declare(strict_types=1);

namespace Delayer\Exception;

use Delayer\Taken;

/**
 * push() or pushMany() with `ifAbsent: true` met ids that a job already has
 * (on any topic: ids are global). Nothing was written for those ids; for
 * pushMany() the other jobs were written, and their due times are here, so
 * the caller loses nothing.
 */
class IdTakenException extends \RuntimeException implements DelayerException
{
    /** How many taken ids the message names; all are in $taken. */
    private const NAMED = 3;

    /**
     * @param list<Taken>      $taken every taken id with the job holding it, in input order
     * @param list<float|null> $dues  one entry per job pushed, in input order: its due
     *                                time in Unix seconds, or null for a taken id (one
     *                                null for push())
     */
    public function __construct(
        public readonly array $taken,
        public readonly array $dues,
    ) {
        $named = array_map(
            static fn (Taken $t): string => sprintf(
                '%s (topic %s, %s)',
                json_encode($t->id, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE),
                $t->topic === '' ? 'unreadable' : $t->topic,
                $t->due === null ? 'not waiting' : sprintf('due %.3F', $t->due)
            ),
            \array_slice($taken, 0, self::NAMED)
        );
        $more = \count($taken) - self::NAMED;
        parent::__construct(
            (\count($taken) === 1 ? 'id taken: ' : \count($taken) . ' ids taken: ')
            . implode(', ', $named) . ($more > 0 ? " and {$more} more" : '')
        );
    }
}
