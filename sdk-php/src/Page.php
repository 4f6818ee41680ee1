<?php

declare(strict_types=1);

namespace Delayer;

/**
 * One page of a listing ({@see Client::listScheduled()} and its kin).
 *
 * @template T
 */
final class Page
{
    /** The most entries one page holds. */
    public const MAX_ITEMS = 1000;

    /** Entries list.lua examines per call (bounds each call's time in Redis). */
    public const EXAMINE_PER_CALL = 1000;

    /** Calls one page may take before it is handed back short, with a cursor. */
    public const CALLS_PER_PAGE = 10;

    /**
     * @param list<T>  $items
     * @param int|null $next the next page's cursor, null at the end (a page may be short while it is not)
     */
    public function __construct(
        public readonly array $items,
        public readonly ?int $next,
    ) {
    }
}
