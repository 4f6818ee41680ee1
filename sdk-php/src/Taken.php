<?php

declare(strict_types=1);

namespace Delayer;

/**
 * An id that push() or pushMany() with `ifAbsent: true` found taken, and the
 * job holding it ({@see Exception\IdTakenException}). Ids are global across
 * topics: the holder may be on another topic than the job that was refused.
 */
final class Taken
{
    /**
     * @param string     $id    the id that was taken
     * @param string     $topic the topic of the job holding it ("" if its data is unreadable)
     * @param float|null $due   that job's due time in Unix seconds (ms precision) while it
     *                          waits in the pool; null when it is not waiting (ready,
     *                          reserved or dead)
     */
    public function __construct(
        public readonly string $id,
        public readonly string $topic,
        public readonly ?float $due,
    ) {
    }
}
