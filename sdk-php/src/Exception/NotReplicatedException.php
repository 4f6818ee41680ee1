<?php

declare(strict_types=1);

namespace Delayer\Exception;

/**
 * A durable push (option `durable`) was written on the master but no
 * replica acknowledged it in time: a failover now could lose it. Pushing
 * the same ids again is safe (a push replaces).
 */
final class NotReplicatedException extends \RuntimeException implements DelayerException
{
    /** @param float $timeout how long Redis waited for a replica, seconds */
    public function __construct(public readonly int $jobs, public readonly float $timeout)
    {
        $ms = (int) round($timeout * 1000);
        parent::__construct("{$jobs} job(s) written on the master, but no replica acknowledged them within {$ms} ms: a failover now could lose them");
    }
}
