<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * An argument broke the protocol's input rules (id, topic, delay,
 * ready_max_lifetime, bpop / breserve timeout, ttr, max_attempts, backoff,
 * dead-letter range or ids). Raised before any Redis call: nothing was
 * written or read.
 */
class InvalidArgumentException extends \InvalidArgumentException implements DelayerException
{
}
