<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * An argument broke the protocol's input rules: raised before any Redis call,
 * or when a script refused its input ("ERR invalid argument: <why>", the
 * message then being <why>; flow.lua's rate limits are checked only there).
 */
class InvalidArgumentException extends \InvalidArgumentException implements DelayerException
{
}
