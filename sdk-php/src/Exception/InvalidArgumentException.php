<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * An argument broke the protocol's input rules (id, topic, delay,
 * ready_max_lifetime, bpop timeout). Raised before any Redis call: nothing
 * was written or read.
 */
class InvalidArgumentException extends \InvalidArgumentException implements DelayerException
{
}
