<?php

declare(strict_types=1);

namespace Delayer\Exception;

/** An argument broke the protocol's input rules; raised before any Redis call. */
class InvalidArgumentException extends \InvalidArgumentException implements DelayerException
{
}
