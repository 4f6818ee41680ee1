<?php

/**
 * A Worker process for WorkerTest and WorkerFleetTest, driven by the
 * environment, that writes what happens to a log file (one JSON object per
 * line, appended whole, so that several processes may share one file and a
 * kill -9 cuts no line in two).
 *
 * Env: DELAYER_URL; WORKER_LOG (file); WORKER_TOPICS (comma-separated);
 * WORKER_MODE (at-least-once | at-most-once); WORKER_TTR; WORKER_GRACE
 * ("none" for no limit); WORKER_AUTO_TOUCH (0|1); WORKER_RECONNECT_MAX.
 *
 * What a handler does is in the job's body, words separated by spaces:
 * "ok"; "fail" (throws RuntimeException); "fail-first" (throws on attempt
 * 1 only); "sleep:S" (busy for S seconds, in 10 ms steps that a signal cannot
 * cut short); "touch:S:T" (busy S seconds, $job->touch() every T seconds);
 * "extend:S:E" (busy S seconds, $job->extend(E) at the start);
 * "stop" (calls $worker->stop()).
 */

declare(strict_types=1);

require __DIR__ . '/../../vendor/autoload.php';

use Delayer\Client;
use Delayer\Job;
use Delayer\Worker;

$log = (string) getenv('WORKER_LOG');
$write = static function (array $line) use ($log): void {
    $line += ['pid' => getmypid(), 't' => microtime(true)];
    file_put_contents($log, json_encode($line, JSON_THROW_ON_ERROR) . "\n", FILE_APPEND | LOCK_EX);
};
$busy = static function (float $seconds, ?Closure $each = null, float $every = INF): void {
    $until = microtime(true) + $seconds;
    $next = microtime(true) + $every;
    while (microtime(true) < $until) {
        usleep(10000);
        if ($each !== null && microtime(true) >= $next) {
            $each();
            $next = microtime(true) + $every;
        }
    }
};

$grace = getenv('WORKER_GRACE') ?: '25';
$worker = new Worker(
    new Client(['url' => (string) getenv('DELAYER_URL'), 'timeout' => 2]),
    mode: getenv('WORKER_MODE') ?: Worker::AT_LEAST_ONCE,
    ttr: (float) (getenv('WORKER_TTR') ?: 60),
    idleWait: 0.2,
    autoTouch: getenv('WORKER_AUTO_TOUCH') !== '0',
    stopGrace: $grace === 'none' ? null : (float) $grace,
    logger: static function (string $level, string $message) use ($write): void {
        $write(['event' => 'log', 'level' => $level, 'message' => $message]);
    },
    reconnectMax: (float) (getenv('WORKER_RECONNECT_MAX') ?: 0.5),
);
$worker->on(static function (string $event, array $data) use ($write): void {
    unset($data['exception']);
    $write(['event' => $event] + $data);
});
$handler = static function (Job $job) use ($write, $busy, $worker): void {
    $write(['event' => 'run', 'id' => $job->id, 'topic' => $job->topic, 'attempts' => $job->attempts, 'traceparent' => $job->traceparent]);
    foreach (explode(' ', $job->body) as $word) {
        $args = explode(':', $word);
        switch ($args[0]) {
            case 'fail':
                throw new RuntimeException("boom {$job->id}");
            case 'fail-first':
                if ($job->attempts === 1) {
                    throw new RuntimeException("first try of {$job->id}");
                }
                break;
            case 'sleep':
                $busy((float) $args[1]);
                break;
            case 'touch':
                $busy((float) $args[1], static function () use ($job, $write): void {
                    $write(['event' => 'explicit_touch', 'id' => $job->id, 'deadline' => $job->touch()]);
                }, (float) $args[2]);
                break;
            case 'extend':
                $write(['event' => 'extend', 'id' => $job->id, 'before' => $job->deadline(), 'after' => $job->extend((float) $args[2])]);
                $busy((float) $args[1]);
                break;
            case 'stop':
                $worker->stop();
                break;
        }
    }
    $write(['event' => 'done', 'id' => $job->id, 'topic' => $job->topic, 'attempts' => $job->attempts]);
};
foreach (explode(',', (string) getenv('WORKER_TOPICS')) as $topic) {
    $worker->handle($topic, $handler);
}
$write(['event' => 'ready']);
$worker->run();
$write(['event' => 'exit']);
