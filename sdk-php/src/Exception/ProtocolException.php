<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Redis answered with a reply the protocol does not allow (a script
 * returned another shape than docs/PROTOCOL.md says: a script of another
 * version loaded under the same name, or a proxy in between). Not
 * transient, like {@see RedisErrorException}.
 */
class ProtocolException extends \RuntimeException implements DelayerException
{
}
