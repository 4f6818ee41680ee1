<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A topic's rate limit as Redis holds it ({@see Client::setRateLimit()},
 * docs/PROTOCOL.md, "Flow control"): at most $burst + $perSecond * t of the
 * topic's jobs become ready in any t seconds. Read back, never checked here:
 * flow.lua is the one place that says which limits are allowed.
 */
final class RateLimit
{
    /**
     * @param float $perSecond jobs per second made ready, once the burst is spent
     * @param int   $burst     jobs that may become ready at once (the token bucket's size)
     */
    public function __construct(
        public readonly float $perSecond,
        public readonly int $burst,
    ) {
    }
}
