<?php
/**
 * The PHP SDK (Delayer\Client) behind the conformance line protocol.
 *
 * Usage: php php_driver.php --host 127.0.0.1 --port PORT --prefix delayer:
 * (or env DELAYER_HOST / DELAYER_PORT / DELAYER_PREFIX). The SDK's autoloader
 * is sdk-php/vendor/autoload.php (`composer dump-autoload` in sdk-php), or
 * env DELAYER_PHP_AUTOLOAD. See ../README.md for the protocol.
 */

declare(strict_types=1);

use Delayer\Client;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;

require getenv('DELAYER_PHP_AUTOLOAD') ?: dirname(__DIR__, 2) . '/sdk-php/vendor/autoload.php';

$opts = getopt('', ['host:', 'port:', 'prefix:']);
$host = $opts['host'] ?? (getenv('DELAYER_HOST') ?: '127.0.0.1');
$port = (int) ($opts['port'] ?? (getenv('DELAYER_PORT') ?: 6379));
$prefix = $opts['prefix'] ?? (getenv('DELAYER_PREFIX') ?: 'delayer:');

$client = new Client(['host' => $host, 'port' => $port, 'database' => 0, 'password' => '', 'prefix' => $prefix]);

/** @return array<string, mixed>|null */
function job_json(Message|false $m): ?array
{
    if ($m === false) {
        return null;
    }
    return ['id' => $m->id, 'topic' => $m->topic, 'body_b64' => base64_encode($m->body)];
}

/** JSON numbers arrive as int or float; milliseconds become seconds (int when whole). */
function seconds(int|float $ms): int|float
{
    return \is_int($ms) && $ms % 1000 === 0 ? intdiv($ms, 1000) : $ms / 1000;
}

/** @param array<string, mixed> $req @return array<string, mixed> */
function handle(Client $client, array $req): array
{
    switch ($req['op'] ?? null) {
        case 'push':
            $body = base64_decode($req['body_b64'] ?? '', true);
            if ($body === false) {
                throw new \RuntimeException('body_b64 is not base64');
            }
            $message = Message::create($req['id'], $req['topic'], $body);
            $life = $req['ready_max_lifetime_s'] ?? Client::DEFAULT_READY_MAX_LIFETIME;
            $client->push($message, seconds($req['delay_ms']), $life);
            return []; // push() returns true, not the due time
        case 'pop':
            return ['job' => job_json($client->pop($req['topic']))];
        case 'bpop':
            return ['job' => job_json($client->bPop($req['topic'], seconds($req['timeout_ms'])))];
        case 'remove':
            return ['removed' => $client->remove($req['id'])];
        default:
            throw new \RuntimeException('unknown op ' . json_encode($req['op'] ?? null));
    }
}

$in = fopen('php://stdin', 'rb');
while (($line = fgets($in)) !== false) {
    if (trim($line) === '') {
        continue;
    }
    try {
        $req = json_decode($line, true, 16, JSON_THROW_ON_ERROR);
        if (!\is_array($req)) {
            throw new \RuntimeException('request must be a JSON object');
        }
        $response = ['ok' => true] + handle($client, $req);
    } catch (\Throwable $e) {
        $kind = match (true) {
            $e instanceof InvalidArgumentException => 'invalid_argument',
            $e instanceof ConnectionException => 'connection',
            default => 'other',
        };
        $response = ['ok' => false, 'error' => $kind . ': ' . get_class($e) . ': ' . $e->getMessage()];
    }
    $json = json_encode($response, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    fwrite(STDOUT, $json . "\n");
    fflush(STDOUT);
}
