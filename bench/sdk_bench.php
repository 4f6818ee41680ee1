<?php
// Push/pop throughput of the PHP SDK, for delayer-bench (bench/README.md).
//
// usage: php sdk_bench.php REDIS_URL OPS MOVE_LUA AUTOLOAD
//
// Pushes OPS jobs (delay 0) one by one to topic php_a, OPS more with one
// pushMany to topic php_b, moves them all to the ready queues with move.lua
// (not timed), then pops OPS from php_a and bPops OPS from php_b. Prints one
// JSON line of jobs/s: {"push": ..., "push_many": ..., "pop": ..., "bpop": ...}.

declare(strict_types=1);

[, $url, $ops, $moveLua, $autoload] = $argv;
require $autoload;

use Delayer\Client;
use Delayer\Message;

$ops = (int) $ops;
$u = parse_url($url);
$host = $u['host'] ?? '127.0.0.1';
$port = (int) ($u['port'] ?? 6379);
$body = '{"order":1234567,"act":"close"}';

$client = new Client(['host' => $host, 'port' => $port]);
$client->pushTo('warm', 'warm-1', 3600); // load the script
$client->pop('warm');
$rates = [];

$t = hrtime(true);
for ($i = 0; $i < $ops; $i++) {
    $client->pushTo('php_a', "php-a-$i", 0, $body);
}
$rates['push'] = $ops / ((hrtime(true) - $t) / 1e9);

$jobs = [];
for ($i = 0; $i < $ops; $i++) {
    $jobs[] = [Message::create("php-b-$i", 'php_b', $body), 0];
}
$t = hrtime(true);
$client->pushMany($jobs);
$rates['push_many'] = $ops / ((hrtime(true) - $t) / 1e9);

$redis = new Redis();
$redis->connect($host, $port);
$sha = $redis->script('load', file_get_contents($moveLua));
$moved = 0;
do {
    // move.lua's header: KEYS pool, malformed, scheduled_count, topics; ARGV bucket prefix, ready prefix, batch
    $reply = $redis->evalSha($sha, ['delayer:job_pool', 'delayer:malformed', 'delayer:scheduled_count',
        'delayer:topics', 'delayer:job_bucket:', 'delayer:ready_queue:', 1000], 4);
    if (!is_array($reply)) {
        fwrite(STDERR, 'move.lua failed: ' . $redis->getLastError() . "\n");
        exit(1);
    }
    $moved += $reply[0];
} while ($reply[0] == 1000);
if ($moved !== 2 * $ops) {
    fwrite(STDERR, "moved $moved, expected " . (2 * $ops) . "\n");
    exit(1);
}

$t = hrtime(true);
for ($i = 0; $i < $ops; $i++) {
    if ($client->pop('php_a') === false) {
        fwrite(STDERR, "pop found nothing\n");
        exit(1);
    }
}
$rates['pop'] = $ops / ((hrtime(true) - $t) / 1e9);

$t = hrtime(true);
for ($i = 0; $i < $ops; $i++) {
    if ($client->bPop('php_b', 1) === false) {
        fwrite(STDERR, "bPop found nothing\n");
        exit(1);
    }
}
$rates['bpop'] = $ops / ((hrtime(true) - $t) / 1e9);

$client->close();
echo json_encode($rates), "\n";
