<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Marker interface of every exception thrown by this SDK.
 *
 * Catch this to handle any Delayer failure at once:
 *
 *     try { $client->push($message, 60); } catch (\Delayer\Exception\DelayerException $e) { ... }
 *
 * Implemented by {@see InvalidArgumentException} (bad input, nothing was sent
 * to Redis), {@see ConnectionException} (cannot connect, authentication
 * failed, connection lost: transient), {@see RedisErrorException} (Redis
 * refused the command), {@see ProtocolException} (a reply the protocol does
 * not allow), {@see ConfigException} (bad client configuration or
 * delayer.conf) and {@see IdTakenException} (a push with ifAbsent met a
 * taken id).
 */
interface DelayerException extends \Throwable
{
}
