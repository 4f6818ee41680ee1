<?php
// Single pushes of the PHP SDK in both layouts (issue 12: "what a pushing
// client pays" for the per-topic layout).
//
// usage: php bench/layout_push.php [--pushes N] [--rounds N]
//
// Starts one redis-server (sdk-php's test harness, tests/RedisServer.php).
// Each round makes --pushes single pushTo() calls from one process (id = a
// number, empty body, delay 60 s, one topic) with the classic layout and
// with the per-topic layout ('layout' => 'topic'), in alternating order,
// each after a FLUSHALL and a few untimed pushes (connection, script
// cache). It checks that every job landed in its pool and prints pushes/s of
// both and the ratio per-topic / classic, per round. DELAYER_PHP_SRC=<an
// older sdk-php/src> measures that SDK instead (its lua/ beside it).

declare(strict_types=1);

$root = dirname(__DIR__);
$src = getenv('DELAYER_PHP_SRC') ?: '';
if ($src !== '') {
    spl_autoload_register(static function (string $class) use ($src): void {
        if (str_starts_with($class, 'Delayer\\') && !str_starts_with($class, 'Delayer\\Tests\\')) {
            $file = $src . '/' . str_replace('\\', '/', substr($class, 8)) . '.php';
            if (is_file($file)) {
                require $file;
            }
        }
    });
} else {
    require "{$root}/sdk-php/vendor/autoload.php";
}
require "{$root}/sdk-php/tests/RedisServer.php";

use Delayer\Client;
use Delayer\Tests\RedisServer;

const USAGE = 'usage: php bench/layout_push.php [--pushes N] [--rounds N]';

$options = ['--pushes' => 5000, '--rounds' => 3];
for ($k = 1; $k < $argc; $k += 2) {
    $value = str_replace('_', '', $argv[$k + 1] ?? '');
    if (!array_key_exists($argv[$k], $options) || !ctype_digit($value) || (int) $value <= 0) {
        fwrite(STDERR, "layout_push.php: {$argv[$k]} needs a positive number\n" . USAGE . "\n");
        exit(2);
    }
    $options[$argv[$k]] = (int) $value;
}
['--pushes' => $n, '--rounds' => $rounds] = $options;

function load(): string
{
    return implode(' ', array_map(static fn (float $x): string => sprintf('%.2f', $x), sys_getloadavg() ?: []));
}

$server = RedisServer::start();
register_shutdown_function(static fn () => $server->stop());
$from = dirname((new ReflectionClass(Client::class))->getFileName() ?: '?');
echo "PHP push: {$n} single pushes from one process per layout and round; Delayer from {$from}; load average " . load() . "\n";

$clients = [
    'classic' => new Client(['host' => '127.0.0.1', 'port' => $server->port]),
    'topic' => new Client(['host' => '127.0.0.1', 'port' => $server->port, 'layout' => 'topic']),
];
$pools = ['classic' => 'delayer:job_pool', 'topic' => 'delayer:{t}:pool'];
$raw = $server->connect();

/** pushes/s of $n single pushes, after a flush and an untimed warm-up. */
$measure = static function (string $layout) use ($clients, $pools, $raw, $n): float {
    $client = $clients[$layout];
    $raw->flushAll();
    for ($i = 0; $i < 10; $i++) {
        $client->pushTo('t', "warm{$i}", 60);
    }
    $raw->flushAll();
    $t = hrtime(true);
    for ($i = 0; $i < $n; $i++) {
        $client->pushTo('t', (string) $i, 60);
    }
    $rate = $n / ((hrtime(true) - $t) / 1e9);
    $got = (int) $raw->zCard($pools[$layout]);
    if ($got !== $n) {
        fwrite(STDERR, "layout_push.php: {$got} jobs in {$pools[$layout]}, not {$n}\n");
        exit(1);
    }
    return $rate;
};

for ($round = 1; $round <= $rounds; $round++) {
    $rates = [];
    foreach ($round % 2 === 1 ? ['classic', 'topic'] : ['topic', 'classic'] as $layout) {
        $rates[$layout] = $measure($layout);
    }
    printf("round %d: classic %7.0f pushes/s, per-topic %7.0f pushes/s, per-topic / classic %.2f\n",
        $round, $rates['classic'], $rates['topic'], $rates['topic'] / $rates['classic']);
}
foreach ($clients as $client) {
    $client->close();
}
echo 'load average ' . load() . "\n";
