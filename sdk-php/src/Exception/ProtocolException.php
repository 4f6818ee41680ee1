<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * A reply the protocol does not allow (a script of another version under
 * the same name, a proxy in between). Not transient.
 */
class ProtocolException extends \RuntimeException implements DelayerException
{
}
