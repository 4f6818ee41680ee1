<?php

declare(strict_types=1);

namespace Delayer;

/** An id a push with `ifAbsent: true` found taken, and the job holding it (maybe on another topic). */
final class Taken
{
    /**
     * @param string     $topic the holder's topic ("" if its data is unreadable)
     * @param float|null $due   the holder's due time while it waits; null when it is not waiting
     */
    public function __construct(
        public readonly string $id,
        public readonly string $topic,
        public readonly ?float $due,
    ) {
    }
}
