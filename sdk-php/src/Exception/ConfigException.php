<?php

declare(strict_types=1);

namespace Delayer\Exception;

/** The constructor's options or delayer.conf are unreadable or hold a bad value (named with file, section and key). */
class ConfigException extends \RuntimeException implements DelayerException
{
}
