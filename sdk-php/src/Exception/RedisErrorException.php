<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis was reached and answered a command with an error (WRONGTYPE when a
 * key holds another type, OOM, an ACL's NOPERM, a script error, ...). The
 * message carries Redis's error text. The connection is fine: calling again
 * fails the same way until the data or the server's setup is fixed, so a
 * worker must not retry it as it retries a {@see ConnectionException}.
 */
class RedisErrorException extends \RuntimeException implements DelayerException
{
}
