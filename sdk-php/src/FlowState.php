<?php

declare(strict_types=1);

namespace Delayer;

/**
 * One topic's flow control as flow.lua answered it ({@see Client::flow()},
 * docs/PROTOCOL.md, "Flow control"), after the call's action.
 */
final class FlowState
{
    /**
     * @param float|null     $pausedSince when the topic was paused (Unix seconds, Redis's clock), null while it runs
     * @param int            $held        due jobs the pause or the rate limit holds back (0 while running unlimited,
     *                                    once the server has let them go)
     * @param bool           $changed     whether the call changed the state (a pause of a running topic, a resume of a
     *                                    paused one, a new rate or burst, a clear of a limited topic)
     * @param float          $at          Redis's clock at the call (Unix seconds)
     * @param RateLimit|null $rateLimit   the topic's rate limit after the call; null when it has none (or the flow hash
     *                                    holds no readable one: Redis's data is input)
     */
    public function __construct(
        public readonly ?float $pausedSince,
        public readonly int $held,
        public readonly bool $changed,
        public readonly float $at,
        public readonly ?RateLimit $rateLimit = null,
    ) {
    }

    public function isPaused(): bool
    {
        return $this->pausedSince !== null;
    }
}
