<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis could not be reached, refused the credentials or database, or the
 * connection was lost or timed out: transient (the next call connects
 * again). A \RedisException, so 1.x code catching that still catches it.
 * Messages never hold the password; an authentication failure is never
 * chained (a stack trace could carry it).
 */
class ConnectionException extends \RedisException implements DelayerException
{
}
