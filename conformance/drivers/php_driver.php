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

use Delayer\Backoff;
use Delayer\Client;
use Delayer\ConfigFile;
use Delayer\DeadLetter;
use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\IdTakenException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Message;
use Delayer\Options;
use Delayer\RateLimit;
use Delayer\ReservedMessage;
use Delayer\TopicStats;

require getenv('DELAYER_PHP_AUTOLOAD') ?: dirname(__DIR__, 2) . '/sdk-php/vendor/autoload.php';

$opts = getopt('', ['host:', 'port:', 'prefix:', 'config:']);
$host = $opts['host'] ?? (getenv('DELAYER_HOST') ?: '127.0.0.1');
$port = (int) ($opts['port'] ?? (getenv('DELAYER_PORT') ?: 6379));
$prefix = $opts['prefix'] ?? (getenv('DELAYER_PREFIX') ?: 'delayer:');

// --config: a delayer.conf instead of host/port/prefix (sentinel mode, for one).
$client = isset($opts['config']) && \is_string($opts['config'])
    ? Client::fromConfig($opts['config'])
    : new Client(['host' => $host, 'port' => $port, 'database' => 0, 'password' => '', 'prefix' => $prefix]);

/** @return array<string, mixed>|null */
function job_json(Message|false $m): ?array
{
    if ($m === false) {
        return null;
    }
    return [
        'id' => $m->id, 'id_b64' => base64_encode($m->id), 'topic' => $m->topic, 'body_b64' => base64_encode($m->body),
        'traceparent' => $m->traceparent,
    ];
}

/** @return array<string, mixed>|null */
function reserved_json(ReservedMessage|false $m): ?array
{
    if ($m === false) {
        return null;
    }
    return [
        'id' => $m->id,
        'id_b64' => base64_encode($m->id),
        'topic' => $m->topic,
        'body_b64' => base64_encode($m->body),
        'attempts' => $m->attempts,
        'max_attempts' => $m->maxAttempts,
        'receipt' => $m->receipt,
        'deadline' => $m->deadline,
        'traceparent' => $m->traceparent,
    ];
}

/** @return array{per_second: float|null, burst: int|null} a topic's limit, nulls when none */
function rate_json(?RateLimit $limit): array
{
    return ['per_second' => $limit?->perSecond, 'burst' => $limit?->burst];
}

/** @return array<string, mixed> */
function dead_json(DeadLetter $d): array
{
    return [
        'id' => $d->id,
        'id_b64' => base64_encode($d->id),
        'topic' => $d->topic,
        'body_b64' => base64_encode($d->body),
        'attempts' => $d->attempts,
        'reason' => $d->reason,
        'dead_at' => $d->deadAt,
        'last_error' => $d->lastError,
    ];
}

/** push's optional "backoff": {"kind":"fixed","delay_ms":N} or {"kind":"exponential","base_ms":N,"max_ms":N}. */
function backoff(mixed $spec): ?Backoff
{
    if ($spec === null) {
        return null;
    }
    return match (\is_array($spec) ? ($spec['kind'] ?? null) : null) {
        'fixed' => Backoff::fixed(seconds($spec['delay_ms'])),
        'exponential' => Backoff::exponential(seconds($spec['base_ms']), seconds($spec['max_ms'])),
        default => throw new \RuntimeException('backoff must be {"kind":"fixed",...} or {"kind":"exponential",...}'),
    };
}

/** "receipt": a string is passed with the id; null passes the id alone. */
function receipt(array $req): ?string
{
    $receipt = $req['receipt'] ?? null;
    if ($receipt !== null && !\is_string($receipt)) {
        throw new \RuntimeException('receipt must be a string or null');
    }
    return $receipt;
}

/** The optional "topic" of an id-only op (remove, reschedule, ack, ...): needed in the per-topic layout. */
function topic(array $req): ?string
{
    $topic = $req['topic'] ?? null;
    if ($topic !== null && !\is_string($topic)) {
        throw new \RuntimeException('topic must be a string or null');
    }
    return $topic;
}

/** The request's id: "id_b64" (any bytes: PHP strings are bytes), else "id". */
function req_id(array $req): mixed
{
    if (isset($req['id_b64'])) {
        return base64_decode($req['id_b64'], true);
    }
    return $req['id'] ?? null;
}

/** "ids" (or "ids_b64", any bytes): a list of ids, or null for all. */
function ids(array $req): ?array
{
    if (isset($req['ids_b64'])) {
        return array_map(static fn ($i) => base64_decode($i, true), $req['ids_b64']);
    }
    $ids = $req['ids'] ?? null;
    if ($ids !== null && (!\is_array($ids) || !array_is_list($ids))) {
        throw new \RuntimeException('ids must be a list or null');
    }
    return $ids;
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
            $message = Message::create(req_id($req), $req['topic'], $body);
            if (($req['max_attempts'] ?? null) !== null) {
                $message = $message->withMaxAttempts($req['max_attempts']);
            }
            $message = $message->withBackoff(backoff($req['backoff'] ?? null))->withTraceparent($req['traceparent'] ?? null);
            $life = $req['ready_max_lifetime_s'] ?? Client::DEFAULT_READY_MAX_LIFETIME;
            try {
                $client->schedule($message, seconds($req['delay_ms']), $life, ifAbsent: (bool)($req['if_absent'] ?? false));
            } catch (IdTakenException $e) {
                return ['taken' => ['topic' => $e->taken[0]->topic, 'due' => $e->taken[0]->due]];
            }
            return []; // schedule() returns true, not the due time
        case 'push_many':
            $items = [];
            foreach ($req['jobs'] as $j) {
                $body = base64_decode($j['body_b64'] ?? '', true);
                if ($body === false) {
                    throw new \RuntimeException('body_b64 is not base64');
                }
                $items[] = [Message::create(req_id($j), $j['topic'], $body)->withTraceparent($j['traceparent'] ?? null), seconds($j['delay_ms'])];
            }
            try {
                $client->pushMany($items, (bool)($req['if_absent'] ?? false));
            } catch (IdTakenException $e) {
                $taken = array_map(fn ($t) => ['id' => $t->id, 'topic' => $t->topic, 'due' => $t->due], $e->taken);
                return ['due' => $e->dues, 'taken' => $taken];
            }
            return ['due' => null, 'taken' => []]; // pushMany() returns a count, not the due times
        case 'pop':
            return ['job' => job_json($client->pop($req['topic']))];
        case 'bpop':
            return ['job' => job_json($client->bPop($req['topic'], seconds($req['timeout_ms'])))];
        case 'remove':
            // remove()'s 1.x declaration takes the topic as an extra argument
            return ['removed' => topic($req) === null ? $client->remove(req_id($req)) : $client->remove(req_id($req), topic($req))];
        case 'reserve':
            return ['job' => reserved_json($client->reserve($req['topic'], seconds($req['ttr_ms'])))];
        case 'breserve':
            return ['job' => reserved_json($client->bReserve(
                $req['topic'],
                seconds($req['ttr_ms']),
                seconds($req['timeout_ms'])
            ))];
        case 'ack':
            return ['done' => $client->ack(req_id($req), receipt($req), topic($req))];
        case 'touch':
            $deadline = $client->touch(req_id($req), seconds($req['ttr_ms']), receipt($req), topic($req));
            return ['deadline' => $deadline === false ? null : $deadline];
        case 'release':
            $delay = $req['delay_ms'] ?? null;
            return ['done' => $client->release(req_id($req), $delay === null ? null : seconds($delay), receipt($req), null, topic($req))];
        case 'bury':
            return ['done' => $client->bury(req_id($req), receipt($req), null, topic($req))];
        case 'reschedule':
            $due = $client->reschedule(req_id($req), seconds($req['delay_ms']), topic($req));
            return ['due' => $due === false ? null : $due];
        case 'dead_list':
            $dead = $client->deadLetters($req['topic'], $req['start'] ?? 0, $req['count'] ?? 100);
            return ['dead' => array_map('dead_json', $dead)];
        case 'requeue_dead':
            return ['count' => $client->requeueDead($req['topic'], ids($req))];
        case 'purge_dead':
            return ['count' => $client->purgeDead($req['topic'], ids($req))];
        case 'job':
            $j = $client->job($req['topic'], req_id($req));
            // `delayer job --json`'s shape: an id that is not UTF-8 as id_base64
            $id = mb_check_encoding($j->id, 'UTF-8') ? ['id' => $j->id] : ['id_base64' => base64_encode($j->id)];
            return ['job' => $id + [
                'state' => $j->state, 'topic' => $j->topic, 'body_size' => $j->bodySize,
                'attempts' => $j->attempts, 'max_attempts' => $j->maxAttempts, 'due' => $j->due,
                'deadline' => $j->deadline, 'dead_at' => $j->deadAt, 'dead_reason' => $j->deadReason,
                'last_error' => $j->lastError, 'traceparent' => $j->traceparent, 'flow' => $j->flow,
            ]];
        case 'stats':
            // per topic as Client::stats() has it, the pause as the flow op answers it
            $stats = $client->stats();
            return [
                'scheduled_total' => $stats->scheduledTotal, 'reserved_total' => $stats->reservedTotal,
                'topics' => array_map(static fn (TopicStats $t): array => [
                    'topic' => $t->topic, 'scheduled' => $t->scheduled, 'ready' => $t->ready, 'reserved' => $t->reserved,
                    'dead' => $t->dead, 'paused' => $t->paused, 'paused_since' => $t->pausedSince, 'held' => $t->held,
                ] + rate_json($t->rateLimit), $stats->topics),
            ];
        case 'pause':
            return ['changed' => $client->pause($req['topic'])];
        case 'resume':
            return ['changed' => $client->resume($req['topic'])];
        case 'is_paused':
            return ['paused' => $client->isPaused($req['topic'])];
        case 'flow':
            $flow = $client->flow($req['topic']);
            return ['paused_since' => $flow->pausedSince, 'held' => $flow->held] + rate_json($flow->rateLimit);
        case 'set_rate_limit':
            // per_second as JSON gave it (100 an int, 0.5 a float); burst absent or null: the script's default
            $flow = $client->setRateLimit($req['topic'], $req['per_second'], $req['burst'] ?? null);
            return ['paused_since' => $flow->pausedSince, 'held' => $flow->held, 'changed' => $flow->changed] + rate_json($flow->rateLimit);
        case 'clear_rate_limit':
            return ['changed' => $client->clearRateLimit($req['topic'])];
        case 'read_config':
            // Client::fromConfig() connects (1.x's constructor does): read and
            // check what it would be built from, without connecting, as the
            // other drivers do (the file may name a Redis that is not there).
            $options = Options::parse(ConfigFile::load($req['path']), ['host' => '127.0.0.1', 'port' => 6379, 'database' => 0, 'password' => '']);
            return ['prefix' => $options->keys->prefix()];
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
            $e instanceof ConfigException => 'config',
            default => 'other',
        };
        $response = ['ok' => false, 'error' => $kind . ': ' . get_class($e) . ': ' . $e->getMessage()];
    }
    $json = json_encode($response, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    fwrite(STDOUT, $json . "\n");
    fflush(STDOUT);
}
