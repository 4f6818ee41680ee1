<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis could not be reached, refused the credentials, or answered a command
 * with an error. The underlying \RedisException, when there is one, is
 * available through getPrevious() (except for authentication failures, which
 * are never chained so that no stack trace can carry the password).
 *
 * Messages never contain the password.
 */
class ConnectionException extends \RuntimeException implements DelayerException
{
}
