<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Thrown into a Worker's handler that outlived a stop's grace period: its
 * job is released and run() returns. A handler catching \Throwable should
 * let it through.
 */
class WorkerStoppedException extends \RuntimeException implements DelayerException
{
}
