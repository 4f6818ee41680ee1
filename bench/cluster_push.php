<?php
// pushMany of the PHP SDK on a local Redis Cluster beside one Redis
// (issue 12: "push_many per SDK in cluster mode").
//
// usage: php bench/cluster_push.php [--jobs N] [--topics N] [--rounds N]
//
// Starts one redis-server (sdk-php's test harness, tests/RedisServer.php) and
// a 6-node cluster of 3 masters (testkit/cluster.py run as a program, with
// .venv/bin/python, as ClusterTest does), both on loopback, persistence off.
// Each round pushes --jobs jobs (id = a number, empty body, due now) over
// --topics topics in the per-topic layout ('layout' => 'topic'; 'cluster' =>
// seeds for the cluster, the SDK's own slot routing over phpredis), sorted by
// topic and sent by pushMany 1000 at a time as a producer of one kind of job
// would, against one Redis and against the cluster, in alternating order,
// each after a FLUSHALL. It checks every job landed in its topic's pool and
// prints jobs/s of both and the ratio cluster / one Redis, per round. The
// cluster's nodes share the machine's cores with everything else: it
// measures the cluster's overhead, not added capacity.

declare(strict_types=1);

$root = dirname(__DIR__);
require "{$root}/sdk-php/vendor/autoload.php";
require "{$root}/sdk-php/tests/RedisServer.php";

use Delayer\Client;
use Delayer\Keys;
use Delayer\Message;
use Delayer\Tests\RedisServer;

const CHUNK = 1000;
const USAGE = 'usage: php bench/cluster_push.php [--jobs N] [--topics N] [--rounds N]';

$options = ['--jobs' => 100000, '--topics' => 30, '--rounds' => 2];
for ($k = 1; $k < $argc; $k += 2) {
    $value = str_replace('_', '', $argv[$k + 1] ?? '');
    if (!array_key_exists($argv[$k], $options) || !ctype_digit($value) || (int) $value <= 0) {
        fwrite(STDERR, "cluster_push.php: {$argv[$k]} needs a positive number\n" . USAGE . "\n");
        exit(2);
    }
    $options[$argv[$k]] = (int) $value;
}
['--jobs' => $n, '--topics' => $topicCount, '--rounds' => $rounds] = $options;

function load(): string
{
    return implode(' ', array_map(static fn (float $x): string => sprintf('%.2f', $x), sys_getloadavg() ?: []));
}

$topics = [];
for ($t = 0; $t < $topicCount; $t++) {
    $topics[] = "t{$t}";
}
$jobs = [];
for ($i = 0; $i < $n; $i++) {
    $jobs[] = [Message::create((string) $i, $topics[$i % $topicCount], ''), 0];
}
usort($jobs, static fn (array $a, array $b): int => strcmp($a[0]->topic, $b[0]->topic));
$keys = new Keys('delayer:', Keys::TOPIC);
$pools = array_map(static fn (string $t): string => (string) $keys->names($t)->pool, $topics);
echo "PHP pushMany: {$n} jobs over {$topicCount} topics, per-topic layout, " . CHUNK . ' jobs per call; load average ' . load() . "\n";

$single = RedisServer::start();
$dir = sys_get_temp_dir() . '/delayer-bench-cluster-' . getmypid();
@mkdir($dir);
$python = getenv('DELAYER_PYTHON') ?: (is_file("{$root}/.venv/bin/python") ? "{$root}/.venv/bin/python" : 'python3');
$kit = proc_open([$python, "{$root}/testkit/cluster.py", $dir],
    [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', "{$dir}/kit.log", 'a']], $pipes);
$stop = static function () use (&$kit, &$pipes, $single, $dir): void {
    if ($kit !== null) {
        @fwrite($pipes[0], "stop\n");
        fclose($pipes[0]);
        fclose($pipes[1]);
        proc_close($kit);
        $kit = null;
    }
    $single->stop();
    exec('rm -rf ' . escapeshellarg($dir));
};
register_shutdown_function($stop);
$started = is_resource($kit) ? json_decode((string) fgets($pipes[1]), true) : null;
if (!is_array($started)) {
    fwrite(STDERR, 'cluster.py did not start: ' . @file_get_contents("{$dir}/kit.log") . "\n");
    exit(1);
}
$seeds = explode(',', $started['nodes']);

$one = new Client(['host' => '127.0.0.1', 'port' => $single->port, 'layout' => 'topic']);
$many = new Client(['cluster' => $seeds]);
$rawOne = $single->connect();
$rawMany = new RedisCluster(null, $seeds, 5, 5);

$flushOne = static fn () => $rawOne->flushAll();
$flushMany = static function () use ($rawMany): void {
    foreach ($rawMany->_masters() as $master) {
        $rawMany->flushAll($master);
    }
};

/** jobs/s of pushMany over every job, after a flush and an untimed warm-up. */
$measure = static function (Client $client, callable $flush, \Redis|\RedisCluster $raw) use ($jobs, $topics, $pools, $n): float {
    $flush();
    $client->pushMany(array_map(static fn (string $t): array => [Message::create('warm', $t, ''), 3600], $topics));
    $flush();
    $t = hrtime(true);
    foreach (array_chunk($jobs, CHUNK) as $chunk) {
        $client->pushMany($chunk);
    }
    $rate = $n / ((hrtime(true) - $t) / 1e9);
    $got = array_sum(array_map(static fn (string $pool): int => (int) $raw->zCard($pool), $pools));
    if ($got !== $n) {
        fwrite(STDERR, "cluster_push.php: {$got} jobs in the pools, not {$n}\n");
        exit(1);
    }
    return $rate;
};

for ($round = 1; $round <= $rounds; $round++) {
    if ($round % 2 === 1) {
        $r1 = $measure($one, $flushOne, $rawOne);
        $rc = $measure($many, $flushMany, $rawMany);
    } else {
        $rc = $measure($many, $flushMany, $rawMany);
        $r1 = $measure($one, $flushOne, $rawOne);
    }
    printf("round %d: one Redis %9.0f jobs/s, 3-master cluster %9.0f jobs/s, cluster / one Redis %.2f\n", $round, $r1, $rc, $rc / $r1);
}
$one->close();
$many->close();
echo 'load average ' . load() . "\n";
