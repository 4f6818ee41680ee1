<?php

// An at-least-once worker: each job of topic "mail" is reserved for 60 s,
// then acked when done, released (tried again after its backoff) when it
// failed, or buried (dead letters) when it can never succeed. It keeps going
// through Redis restarts and network cuts.
// Run: DELAYER_URL=redis://127.0.0.1:6379/0 php reliable_worker.php

declare(strict_types=1);

require __DIR__ . '/../vendor/autoload.php';

use Delayer\Client;
use Delayer\Exception\ConnectionException;
use Delayer\ReservedMessage;

function send(ReservedMessage $job): void
{
    // your work here: throw to try again later
    $mail = json_decode($job->body, true, 16, JSON_THROW_ON_ERROR);
    echo "mail {$job->id} to {$mail['to']}, attempt {$job->attempts}\n";
}

$url = getenv('DELAYER_URL') ?: 'redis://127.0.0.1:6379/0';
$client = null;
$pause = 0.1;
while (true) {
    try {
        $client ??= new Client(['url' => $url]);   // connects: may fail as well
        $job = $client->bReserve('mail', 60, 10);   // ttr 60 s; false after 10 s without a job
        $pause = 0.1;
        if ($job === false) {
            continue;
        }
        try {
            send($job);
        } catch (\JsonException) {
            $client->bury($job);                    // a body that is not JSON never will be
            continue;
        } catch (\Throwable) {
            $client->release($job);                 // again after the job's backoff
            continue;
        }
        $client->ack($job);                         // done: the job is deleted
    } catch (ConnectionException $e) {
        // Redis is unreachable (down, restarting): the next call connects
        // again. A job whose ack was lost is delivered again after its ttr.
        error_log(sprintf('delayer: %s; trying again in %.1f s', $e->getMessage(), $pause));
        usleep((int) ($pause * 1e6));
        $pause = min($pause * 2, 5.0);
    }
}
