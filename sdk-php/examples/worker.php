<?php

// A worker: handles the jobs of topic "order" as they fall due, and keeps
// going through Redis restarts and network cuts.
// Run: DELAYER_URL=redis://127.0.0.1:6379/0 php worker.php

declare(strict_types=1);

require __DIR__ . '/../vendor/autoload.php';

use Delayer\Client;
use Delayer\Exception\ConnectionException;
use Delayer\Message;

function handle(Message $message): void
{
    echo "order {$message->id}: {$message->body}\n"; // your work here
}

$url = getenv('DELAYER_URL') ?: 'redis://127.0.0.1:6379/0';
$client = null;
$pause = 0.1;
while (true) {
    try {
        $client ??= new Client(['url' => $url]); // connects: may fail as well
        $message = $client->bPop('order', 10);    // a job, or false after 10 s without one
        $pause = 0.1;
        if ($message !== false) {
            handle($message);
        }
    } catch (ConnectionException $e) {
        // Redis is unreachable (down, restarting): the next call connects
        // again. Wait a little longer each time, up to 5 s.
        error_log(sprintf('delayer: %s; trying again in %.1f s', $e->getMessage(), $pause));
        usleep((int) ($pause * 1e6));
        $pause = min($pause * 2, 5.0);
    }
}
