<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A message with its delay and ready_max_lifetime, for {@see Client::pushMany()}.
 *
 *     $client->pushMany([
 *         new ScheduledMessage(Message::create('a', 'order'), 60),
 *         new ScheduledMessage(Message::create('b', 'order', 'x'), 1.5, 3600),
 *     ]);
 */
final class ScheduledMessage
{
    /** @param int|float $readyMaxLifetime whole seconds (60.0 is whole) */
    public function __construct(
        public readonly Message $message,
        public readonly int|float $delay,
        public readonly int|float $readyMaxLifetime = Client::DEFAULT_READY_MAX_LIFETIME,
    ) {
    }
}
