<?php

declare(strict_types=1);

namespace Delayer;

/**
 * The signals a {@see Worker} uses: SIGTERM and SIGINT stop it, SIGALRM wakes
 * it while a handler runs (one thread: a signal is the only way to act then);
 * async, between two PHP statements. What was installed before is put back.
 *
 * @internal used by {@see Worker}
 */
final class WorkerSignals
{
    /** @var array<int, mixed> signal => the handler installed before */
    private array $previous = [];

    private bool $asyncBefore = false;

    private bool $alarm = false;

    private function __construct()
    {
    }

    /** Whether this PHP has what the worker needs (the pcntl extension, CLI). */
    public static function available(): bool
    {
        return \function_exists('pcntl_async_signals') && \function_exists('pcntl_signal')
            && \function_exists('pcntl_alarm') && \function_exists('pcntl_signal_get_handler');
    }

    /**
     * @param \Closure(int): void $onStop  run on SIGTERM / SIGINT (when $stop)
     * @param \Closure(): void    $onAlarm run on SIGALRM (when $alarm)
     */
    public static function install(bool $stop, bool $alarm, \Closure $onStop, \Closure $onAlarm): self
    {
        $signals = new self();
        $signals->asyncBefore = pcntl_async_signals(true);
        $signals->alarm = $alarm;
        $handlers = ($stop ? [SIGTERM => $onStop, SIGINT => $onStop] : []) + ($alarm ? [SIGALRM => $onAlarm] : []);
        foreach ($handlers as $signal => $handler) {
            $signals->previous[$signal] = pcntl_signal_get_handler($signal);
            pcntl_signal($signal, static fn (int $signo) => $handler($signo));
        }
        return $signals;
    }

    public function hasAlarm(): bool
    {
        return $this->alarm;
    }

    /** SIGALRM in $seconds (whole, at least 1: alarm(2)'s resolution), replacing any alarm set before. */
    public function alarmIn(float $seconds): void
    {
        if ($this->alarm) {
            pcntl_alarm(max(1, (int) ceil($seconds)));
        }
    }

    public function cancelAlarm(): void
    {
        if ($this->alarm) {
            pcntl_alarm(0);
        }
    }

    /** Puts back what install() found. */
    public function restore(): void
    {
        $this->cancelAlarm();
        foreach ($this->previous as $signal => $handler) {
            pcntl_signal($signal, $handler ?? SIG_DFL);
        }
        $this->previous = [];
        $this->alarm = false;
        pcntl_async_signals($this->asyncBefore);
    }
}
