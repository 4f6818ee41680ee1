<?php
/**
 * The PHP Worker behind the worker conformance test
 * (test_conformance_worker.py; the protocol is in ../README.md, "The worker
 * drivers").
 *
 * Usage: php php_worker.php (--host H --port N --prefix P | --config FILE)
 * --topic T --concurrency 1 --ttr-ms N --grace-ms N
 *
 * Runs one Worker on topic T until SIGTERM, writing one JSON line per event
 * on stdout, named as the other SDKs' hooks. The handler does what the job's
 * body says. A PHP Worker runs one handler at a time: --concurrency is
 * accepted and must be 1.
 */

declare(strict_types=1);

use Delayer\Client;
use Delayer\Job;
use Delayer\Worker;

require getenv('DELAYER_PHP_AUTOLOAD') ?: dirname(__DIR__, 2) . '/sdk-php/vendor/autoload.php';

$opts = getopt('', ['host:', 'port:', 'prefix:', 'config:', 'topic:', 'concurrency:', 'ttr-ms:', 'grace-ms:']);
if ((int) ($opts['concurrency'] ?? 1) !== 1) {
    fwrite(STDERR, "a PHP Worker runs one handler at a time: --concurrency 1\n");
    exit(2);
}
$client = isset($opts['config']) && \is_string($opts['config'])
    ? Client::fromConfig($opts['config'])
    : new Client([
        'host' => $opts['host'] ?? '127.0.0.1', 'port' => (int) ($opts['port'] ?? 6379), 'database' => 0,
        'password' => '', 'prefix' => $opts['prefix'] ?? 'delayer:',
    ]);

function emit(string $ev, array $fields = []): void
{
    fwrite(STDOUT, json_encode(['ev' => $ev] + $fields, JSON_THROW_ON_ERROR) . "\n");
    fflush(STDOUT);
}

$worker = new Worker(
    $client,
    ttr: ((int) ($opts['ttr-ms'] ?? 60000)) / 1000,
    stopGrace: ((int) ($opts['grace-ms'] ?? 25000)) / 1000,
    logger: static function (): void {
    },
);
/** @var array<string, int> $attempts id => attempts of its running job (the events carry no attempts but started's) */
$attempts = [];
$names = [
    'job_started' => 'started', 'job_succeeded' => 'succeeded', 'job_failed' => 'failed', 'acked' => 'acked',
    'ack_lost' => 'not_held', 'reservation_lost' => 'not_held', 'touched' => 'touched',
    'released_at_stop' => 'released_at_stop', 'connection_lost' => 'connection_lost', 'reconnected' => 'reconnected',
    'stopping' => 'stopping', 'stopped' => 'stopped',
];
$worker->on(static function (string $event, array $data) use ($names, &$attempts): void {
    if (!isset($names[$event])) {
        return;
    }
    $fields = [];
    if (isset($data['id'])) {
        $attempts[$data['id']] = $data['attempts'] ?? $attempts[$data['id']] ?? 0;
        $fields = ['id' => $data['id'], 'attempts' => $attempts[$data['id']]];
    }
    if ($event === 'connection_lost') {
        $fields['retry_in'] = $data['retry_in'];
    }
    emit($names[$event], $fields);
    if ($event === 'job_started' && str_starts_with($data['id'], 'hookfail')) {
        throw new RuntimeException('a listener that fails');
    }
});
$worker->handle($opts['topic'], static function (Job $job): void {
    $body = $job->body;
    if ($body === 'fail' || ($body === 'fail-once' && $job->attempts === 1)) {
        throw new RuntimeException('boom');
    }
    if ($body === 'panic') {
        throw new Error('boom'); // PHP's nearest to a panic: an \Error, not an \Exception
    }
    if (str_starts_with($body, 'sleep:')) {
        // A signal ends a usleep() early: sleep to the deadline.
        $until = hrtime(true) + (int) substr($body, 6) * 1_000_000;
        while (($left = $until - hrtime(true)) > 0) {
            usleep(intdiv($left, 1000));
        }
    }
});
emit('running');
$worker->run();
