<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;
use Delayer\Exception\WorkerStoppedException;

/**
 * A consumer loop, so that users do not write (and get wrong) their own
 * around reserve / ack (docs/PROTOCOL.md, "The Worker runtime"):
 *
 *     $worker = new Worker(Client::fromConfig('/etc/delayer.conf'));
 *     $worker->handle('mail', function (Job $job): void { send($job->body); }, ttr: 60);
 *     $worker->run(); // returns once stopped
 *
 * One handler runs at a time (run several processes for concurrency);
 * topics are taken in turn. At least once (default): a handler returning
 * acks its job (with the call that takes the next), one throwing releases
 * it with its backoff. At most once: pop, and a failed job is lost.
 *
 * With pcntl, SIGALRM touches a reservation once half its ttr passed (ttrs
 * of 3 s and more) and ends a handler that outruns a stop's grace period
 * (WorkerStoppedException); SIGTERM / SIGINT stop the worker. While run()
 * runs a handler must not use pcntl_alarm(), and its sleep() may end early.
 */
final class Worker
{
    /** Reserve, run, ack: a job is never lost, and may run again. Pop, run: never twice, lost on failure. */
    public const AT_LEAST_ONCE = 'at-least-once';
    public const AT_MOST_ONCE = 'at-most-once';

    /** The error of a job released at the end of a stop's grace period (the same in every SDK). */
    public const STOPPED = 'WorkerStopped: the worker stopped before the handler finished';

    /** The shortest ttr touched automatically: the alarm's resolution is 1 s. */
    public const MIN_AUTO_TOUCH_TTR = 3.0;

    /** @var array<string, array{0: \Closure(Job): mixed, 1: float}> topic => handler, ttr */
    private array $handlers = [];

    /** @var list<string> in the order registered */
    private array $topics = [];

    private readonly WorkerHooks $hooks;

    private readonly float $ttr;

    private readonly float $idleWait;

    private readonly ?float $stopGrace;

    private readonly float $reconnectMin;

    private readonly float $reconnectMax;

    private int $cursor = 0;

    private int $waitCursor = 0;

    /** @var list<ReservedMessage> finished jobs whose ack goes with the next call */
    private array $acks = [];

    private bool $running = false;

    private bool $stopping = false;

    /** When a stop's grace period ends ({@see BlockingWait::now()}). */
    private ?float $stopAt = null;

    private bool $aborting = false;

    private ?Job $current = null;

    private ?WorkerSignals $pcntl = null;

    /** A connection of its own for touches made from a signal handler. */
    private ?Client $touchClient = null;

    /**
     * @param int|float $ttr seconds a job is reserved for (handlers may set their own)
     * @param int|float $idleWait most seconds an idle worker waits before it looks at every topic again
     * @param bool $autoTouch touch a reservation whose handler has run half its ttr (pcntl)
     * @param bool $signals stop on SIGTERM and SIGINT (pcntl)
     * @param int|float|null $stopGrace seconds a running handler gets once a stop is asked; null: no limit
     * @param callable|object|null $logger callable(level, message, context), a PSR-3 logger, or null: error_log()
     * @param int|float $reconnectMin the wait after a lost connection, doubling up to $reconnectMax
     * @throws InvalidArgumentException on a bad option
     */
    public function __construct(
        private readonly Client $client,
        private readonly string $mode = self::AT_LEAST_ONCE,
        int|float $ttr = 60,
        int|float $idleWait = 1.0,
        private readonly bool $autoTouch = true,
        private readonly bool $signals = true,
        int|float|null $stopGrace = 25,
        callable|object|null $logger = null,
        int|float $reconnectMin = 0.1,
        int|float $reconnectMax = 1.0,
    ) {
        if ($mode !== self::AT_LEAST_ONCE && $mode !== self::AT_MOST_ONCE) {
            throw new InvalidArgumentException('mode must be Worker::AT_LEAST_ONCE or Worker::AT_MOST_ONCE, got ' . var_export($mode, true));
        }
        $this->ttr = Validator::ttrMs($ttr) / 1000;
        $this->idleWait = self::positive('idleWait', $idleWait);
        $this->stopGrace = $stopGrace === null ? null : self::positive('stopGrace', $stopGrace, true);
        $this->reconnectMin = self::positive('reconnectMin', $reconnectMin);
        $this->reconnectMax = max(self::positive('reconnectMax', $reconnectMax), $this->reconnectMin);
        $this->hooks = new WorkerHooks($logger);
    }

    /**
     * Registers (or replaces) a topic's handler: returning means done, throwing failed.
     *
     * @param callable(Job): mixed $handler
     * @param int|float|null $ttr null: the worker's
     */
    public function handle(string $topic, callable $handler, int|float|null $ttr = null): self
    {
        $topic = Validator::name('topic', $topic);
        $ttr = $ttr === null ? $this->ttr : Validator::ttrMs($ttr) / 1000;
        if (!isset($this->handlers[$topic])) {
            $this->topics[] = $topic;
        }
        $this->handlers[$topic] = [$handler(...), $ttr];
        return $this;
    }

    /**
     * Adds a listener of the worker's events (sdk-php/README.md, "Events"); one that throws is logged.
     *
     * @param callable(string, array<string, mixed>): void $listener
     */
    public function on(callable $listener): self
    {
        $this->hooks->listen($listener);
        return $this;
    }

    /**
     * Runs until stopped (a signal, or stop()); returns once the last handler finished and its ack was sent.
     *
     * @throws \LogicException when no handler is registered, or run() already runs
     */
    public function run(): void
    {
        if ($this->topics === []) {
            throw new \LogicException('the worker has no handler: call handle() first');
        }
        if ($this->running) {
            throw new \LogicException('the worker is already running');
        }
        [$this->running, $this->stopping, $this->stopAt, $this->aborting] = [true, false, null, false];
        $pcntl = WorkerSignals::available();
        if ($pcntl && ($this->signals || $this->autoTouch || $this->stopGrace !== null)) {
            $alarm = $this->autoTouch || $this->stopGrace !== null;
            $this->pcntl = WorkerSignals::install($this->signals, $alarm, fn (int $signal) => $this->requestStop($signal), fn () => $this->alarm());
        } elseif (!$pcntl) {
            $this->hooks->log('notice', 'no pcntl: no stop on SIGTERM/SIGINT, no automatic touch, no stop grace period');
        }
        $this->hooks->log('info', sprintf('worker %d started (%s) on %s', getmypid(), $this->mode, implode(', ', $this->topics)));
        $this->hooks->emit('started', ['topics' => $this->topics, 'mode' => $this->mode, 'pid' => getmypid()]);
        try {
            $this->loop();
        } finally {
            $this->pcntl?->restore();
            [$this->pcntl, $this->running] = [null, false];
            $this->hooks->log('info', sprintf('worker %d stopped', getmypid()));
            $this->hooks->emit('stopped');
        }
    }

    /** Asks the worker to stop, as SIGTERM does (from a handler or a listener too). */
    public function stop(): void
    {
        $this->requestStop(0);
    }

    /** Whether a stop was asked for. */
    public function isStopping(): bool
    {
        return $this->stopping;
    }

    private function requestStop(int $signal): void
    {
        if ($this->stopping) {
            return;
        }
        $this->stopping = true;
        if ($this->stopGrace !== null) {
            $this->stopAt = BlockingWait::now() + $this->stopGrace;
        }
        $this->hooks->log('info', $signal === 0 ? 'stopping' : "stopping on signal {$signal}");
        $this->hooks->emit('stopping', ['signal' => $signal]);
        $this->armAlarm();
    }

    private function loop(): void
    {
        $pause = $this->reconnectMin;
        $eviction = new Eviction();
        $check = true;
        $lost = false;
        while (!$this->stopping) {
            try {
                if ($check) {
                    $check = false;
                    $eviction->report($this->client->maxmemoryPolicy(), $this->hooks);
                }
                $job = $this->next();
                $pause = $this->reconnectMin;
                if ($lost) {
                    $lost = false;
                    $this->hooks->log('info', 'Redis answers again');
                    $this->hooks->emit('reconnected');
                }
                if ($job !== null) {
                    $this->process($job);
                }
            } catch (ConnectionException|RedisErrorException|ProtocolException $e) {
                if ($e instanceof ConnectionException) {
                    $eviction->outage();
                    $check = true;
                }
                $lost = true;
                $pause = $this->backOff($e, $pause, true);
            }
        }
        $this->flushAcks();
    }

    /** The next job: one call per topic in turn, then a wait on one of them. */
    private function next(): ?Job
    {
        $count = \count($this->topics);
        for ($i = 0; $i < $count && !$this->stopping; $i++) {
            $topic = $this->topics[$this->cursor];
            $this->cursor = ($this->cursor + 1) % $count;
            if (($job = $this->take($topic)) !== null) {
                return $job;
            }
        }
        if ($this->stopping) {
            return null;
        }
        $topic = $this->topics[$this->waitCursor];
        $this->waitCursor = ($this->waitCursor + 1) % $count;
        return $this->take($topic, max(0.05, $this->idleWait / $count));
    }

    /** A job of $topic, waiting up to $wait seconds; a call without a wait acks the finished jobs (at least once). */
    private function take(string $topic, ?float $wait = null): ?Job
    {
        $ttr = $this->handlers[$topic][1];
        $taken = match (true) {
            $this->mode === self::AT_MOST_ONCE => $wait === null ? $this->client->pop($topic) : $this->client->bPop($topic, $wait),
            // next() has just tried this topic without waiting: the wait need not claim first
            $wait !== null => $this->client->waitReserved($topic, $ttr, $wait, false),
            default => $this->reserveAcking($topic, $ttr, 1)[0] ?? false,
        };
        return $taken === false ? null : new Job($topic, $taken, $this->client, $ttr);
    }

    private function process(Job $job): void
    {
        $started = BlockingWait::now();
        $this->hooks->emit('job_started', ['topic' => $job->topic, 'id' => $job->id, 'attempts' => $job->attempts]);
        $error = null;
        try {
            $this->current = $job;
            $this->armAlarm();
            ($this->handlers[$job->topic][0])($job);
        } catch (\Throwable $e) {
            $error = $e;
        } finally {
            $this->current = null;
            $this->armAlarm();
        }
        $facts = ['topic' => $job->topic, 'id' => $job->id, 'attempts' => $job->attempts, 'seconds' => BlockingWait::now() - $started];
        if ($error === null) {
            if ($job->reservation !== null) {
                $this->acks[] = $job->reservation;
            }
            $this->hooks->emit('job_succeeded', $facts);
            return;
        }
        $text = $error::class . ': ' . $error->getMessage();
        if ($job->reservation === null) {
            $this->hooks->log('error', "job {$job->id} of {$job->topic} failed and is dropped (at most once): {$text}");
            $this->hooks->emit('job_failed', $facts + ['error' => $text, 'exception' => $error, 'outcome' => 'dropped']);
            return;
        }
        if ($error instanceof WorkerStoppedException && $this->aborting) {
            // Interrupted anywhere, maybe inside its own call on the worker's
            // connection: release on the other one, and drop this one.
            $this->touchClient()->release($job->reservation, 0, null, self::STOPPED);
            $this->client->close();
            $this->hooks->log('warning', "job {$job->id} of {$job->topic} released at stop: its handler outran the grace period");
            $this->hooks->emit('released_at_stop', ['topic' => $job->topic, 'id' => $job->id]);
            return;
        }
        $held = $this->client->release($job->reservation, $this->aborting ? 0 : null, null, $text);
        $outcome = !$held ? 'lost' : ($job->isLastAttempt() ? 'dead' : 'retried');
        $this->hooks->log('warning', "job {$job->id} of {$job->topic} failed (attempt {$job->attempts}, {$outcome}): {$text}");
        $this->hooks->emit('job_failed', $facts + ['error' => $text, 'exception' => $error, 'outcome' => $outcome]);
    }

    /** @return list<ReservedMessage> reserveMany(), sending the pending acks, which it reports */
    private function reserveAcking(string $topic, float $ttr, int $n): array
    {
        $acks = $this->acks;
        [$acked, $jobs] = $this->client->reserveMany($topic, $ttr, $n, $acks);
        $this->acks = []; // only once sent: a failed call's acks go with the next
        foreach ($acks as $i => $job) {
            if ($acked[$i] ?? false) {
                $this->hooks->emit('acked', ['topic' => $job->topic, 'id' => $job->id]);
            } else {
                $this->hooks->log('warning', "job {$job->id} of {$job->topic} finished, but its reservation was no longer held"
                    . ' (its ttr ran out, or it was removed): it may run again');
                $this->hooks->emit('ack_lost', ['topic' => $job->topic, 'id' => $job->id]);
            }
        }
        return $jobs;
    }

    /** Sends the acks pending when the loop ends, trying for a few seconds if Redis is away. */
    private function flushAcks(): void
    {
        $until = BlockingWait::now() + min(max($this->stopGrace ?? 5.0, 1.0), 5.0);
        $pause = $this->reconnectMin;
        while ($this->acks !== []) {
            try {
                $this->reserveAcking($this->topics[0], $this->ttr, 0);
            } catch (ConnectionException|RedisErrorException|ProtocolException $e) {
                if (BlockingWait::now() + $pause > $until) {
                    $this->hooks->log('error', \count($this->acks) . ' finished jobs could not be acked (they will run again'
                        . " after their ttr): {$e->getMessage()}");
                    $this->acks = [];
                    return;
                }
                $pause = $this->backOff($e, $pause, false);
            }
        }
    }

    /** SIGALRM: touch the running job's reservation, or end a handler past the stop's grace. */
    private function alarm(): void
    {
        $job = $this->current;
        if ($job === null) {
            return;
        }
        if ($this->stopAt !== null && BlockingWait::now() >= $this->stopAt && !$this->aborting) {
            $this->aborting = true;
            throw new WorkerStoppedException(sprintf('the worker stopped and the handler ran past the grace period (%s s)', $this->stopGrace));
        }
        if ($this->autoTouches($job) && $job->remaining() <= $job->ttr / 2 + 0.5) {
            try {
                $deadline = $job->touchVia($this->touchClient(), $job->ttr);
                if ($deadline === false) {
                    $this->hooks->log('warning', "job {$job->id} of {$job->topic}: its reservation is no longer held"
                        . ' (its ttr ran out): it may be running elsewhere');
                    $this->hooks->emit('reservation_lost', ['topic' => $job->topic, 'id' => $job->id]);
                } else {
                    $this->hooks->emit('touched', ['topic' => $job->topic, 'id' => $job->id, 'deadline' => $deadline]);
                }
            } catch (\Throwable $e) {
                // never into the handler: it would see an error that is not its own
                $this->hooks->log('warning', "job {$job->id} of {$job->topic}: touch failed, trying again in 1 s: {$e->getMessage()}");
            }
        }
        $this->armAlarm();
    }

    /** Sets SIGALRM for the next thing due while a handler runs (a touch, the end of the grace), or none. */
    private function armAlarm(): void
    {
        if ($this->pcntl === null || !$this->pcntl->hasAlarm()) {
            return;
        }
        $job = $this->current;
        $in = INF;
        if ($job !== null && $this->autoTouches($job)) {
            $in = max($job->remaining() - $job->ttr / 2, 0.0);
        }
        if ($job !== null && $this->stopAt !== null && !$this->aborting) {
            $in = min($in, max($this->stopAt - BlockingWait::now(), 0.0));
        }
        $in === INF ? $this->pcntl->cancelAlarm() : $this->pcntl->alarmIn($in);
    }

    private function autoTouches(Job $job): bool
    {
        return $this->autoTouch && $job->reservation !== null && !$job->isReservationLost()
            && $job->ttr >= self::MIN_AUTO_TOUCH_TTR;
    }

    private function touchClient(): Client
    {
        return $this->touchClient ??= $this->client->withOwnConnection();
    }

    /** After a failed call: says so, sleeps $pause (a stop ends it when $interruptible), returns the next pause. */
    private function backOff(\Throwable $e, float $pause, bool $interruptible): float
    {
        $this->hooks->log('warning', sprintf('Redis: %s; trying again in %.1f s', $e->getMessage(), $pause));
        $this->hooks->emit('connection_lost', ['error' => $e->getMessage(), 'retry_in' => $pause]);
        $until = BlockingWait::now() + $pause;
        while (($left = $until - BlockingWait::now()) > 0 && !($interruptible && $this->stopping)) {
            usleep((int) (min($left, 0.05) * 1e6));
        }
        return min($pause * 2, $this->reconnectMax);
    }

    private static function positive(string $what, int|float $value, bool $zero = false): float
    {
        if (!is_finite((float) $value) || $value < 0 || (!$zero && $value == 0)) {
            $kind = $zero ? 'non-negative' : 'positive';
            throw new InvalidArgumentException(sprintf('%s must be a %s number of seconds, got %s', $what, $kind, var_export($value, true)));
        }
        return (float) $value;
    }
}
