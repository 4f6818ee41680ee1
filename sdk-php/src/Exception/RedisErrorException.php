<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis answered a command with an error (WRONGTYPE, OOM, NOPERM, a script
 * error...), carried in the message. Calling again fails the same way until
 * the data or setup is fixed: not to be retried as a ConnectionException is.
 */
class RedisErrorException extends \RuntimeException implements DelayerException
{
}
