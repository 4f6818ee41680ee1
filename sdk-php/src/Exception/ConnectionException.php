<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis could not be reached, refused the credentials or the database, or
 * the connection was lost or timed out during a call. Transient for a
 * worker: wait a little and call again (the next call connects again).
 *
 * It extends \RedisException, so code written for mix/delayer-client 1.x,
 * which caught \RedisException around connecting, still catches it. The
 * underlying \RedisException, when there is one, is getPrevious() (except
 * for authentication failures, never chained so that no stack trace can
 * carry the password). Messages never contain the password.
 *
 * Not raised for a command Redis refused ({@see RedisErrorException}) or a
 * reply the protocol does not allow ({@see ProtocolException}): retrying
 * those would fail the same way forever.
 */
class ConnectionException extends \RedisException implements DelayerException
{
}
