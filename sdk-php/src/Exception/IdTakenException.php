<?php

declare(strict_types=1);

namespace Delayer\Exception;

use Delayer\Taken;

/**
 * A push with `ifAbsent: true` met ids a job already has. Nothing was
 * written for those; pushMany() wrote the others, whose due times are here.
 */
class IdTakenException extends \RuntimeException implements DelayerException
{
    /** How many taken ids the message names; all are in $taken. */
    private const NAMED = 3;

    /**
     * @param list<Taken>      $taken every taken id with the job holding it, in input order
     * @param list<float|null> $dues  per job pushed, in input order: its due time, or null for a taken id
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
