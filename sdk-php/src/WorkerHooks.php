<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\InvalidArgumentException;

/**
 * Where a {@see Worker} reports: log lines (to the user's logger, or error_log())
 * and events (to Worker::on()'s listeners). What a logger or listener throws is reported and dropped.
 *
 * @internal used by {@see Worker}
 */
final class WorkerHooks
{
    /** Levels error_log() gets when no logger is given (the others are dropped). */
    private const DEFAULT_LEVELS = ['emergency', 'alert', 'critical', 'error', 'warning', 'notice'];

    /** @var \Closure(string, string, array<string, mixed>): void */
    private readonly \Closure $logger;

    /** @var list<\Closure(string, array<string, mixed>): void> */
    private array $listeners = [];

    /** @throws InvalidArgumentException on a logger not a callable, an object with PSR-3's log(), or null */
    public function __construct(callable|object|null $logger)
    {
        if ($logger === null) {
            $this->logger = static function (string $level, string $message): void {
                if (\in_array($level, self::DEFAULT_LEVELS, true)) {
                    error_log("delayer worker: {$level}: {$message}");
                }
            };
        } elseif (\is_callable($logger)) {
            $this->logger = $logger(...);
        } elseif (method_exists($logger, 'log')) {
            $this->logger = static function (string $level, string $message, array $context) use ($logger): void {
                $logger->log($level, $message, $context);
            };
        } else {
            throw new InvalidArgumentException('logger must be a callable, an object with a PSR-3 log() method, or null; got ' . get_debug_type($logger));
        }
    }

    /** @param callable(string, array<string, mixed>): void $listener */
    public function listen(callable $listener): void
    {
        $this->listeners[] = $listener(...);
    }

    /** @param array<string, mixed> $context */
    public function log(string $level, string $message, array $context = []): void
    {
        try {
            ($this->logger)($level, $message, $context);
        } catch (\Throwable $e) {
            error_log("delayer worker: the logger failed ({$e->getMessage()}) on: {$level}: {$message}");
        }
    }

    /** @param array<string, mixed> $data */
    public function emit(string $event, array $data = []): void
    {
        foreach ($this->listeners as $listener) {
            try {
                $listener($event, $data);
            } catch (\Throwable $e) {
                $this->log('error', sprintf('a listener failed on %s: %s: %s', $event, $e::class, $e->getMessage()));
            }
        }
    }
}
