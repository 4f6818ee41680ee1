<?php

declare(strict_types=1);

namespace Delayer;

/** A scheduled job ($time: its due time) or a reserved one ($time: its deadline) in a listing. */
final class Listed
{
    public function __construct(
        public readonly string $id,
        public readonly float $time,
    ) {
    }
}
