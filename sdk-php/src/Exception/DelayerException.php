<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Every exception this SDK throws: catch it to handle any Delayer failure.
 * InvalidArgumentException (bad input, nothing sent), ConnectionException
 * (transient), RedisErrorException, ProtocolException, ConfigException,
 * IdTakenException, NotReplicatedException, WorkerStoppedException.
 */
interface DelayerException extends \Throwable
{
}
