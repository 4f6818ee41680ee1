<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * Thrown into a {@see \Delayer\Worker}'s running handler when the worker
 * was asked to stop and the handler outlived the grace period (stopGrace):
 * the worker then releases the job (due at once, the error recorded on it)
 * and returns from run(). A handler that catches \Throwable should let this
 * one through, or the worker waits for it until it returns.
 */
class WorkerStoppedException extends \RuntimeException implements DelayerException
{
}
