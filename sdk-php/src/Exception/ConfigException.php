<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * The client configuration (the array given to the constructor, or the
 * delayer.conf file read by Client::fromConfig()) is unreadable or holds a
 * bad value. The message names the file, section and key when there is one.
 */
class ConfigException extends \RuntimeException implements DelayerException
{
}
