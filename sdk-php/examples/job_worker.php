<?php

// A Worker runs the loop for you: one handler per topic, at least once
// (a handler that returns acks its job; one that throws retries it after the
// job's backoff, its error kept on the job, then dead letters), long jobs
// touched, SIGTERM / SIGINT finish the running job and stop, Redis restarts
// ridden out. One job at a time: run several processes for concurrency.
// Run: DELAYER_URL=redis://127.0.0.1:6379/0 php job_worker.php

declare(strict_types=1);

require __DIR__ . '/../vendor/autoload.php';

use Delayer\Client;
use Delayer\Job;
use Delayer\Worker;

$client = new Client(['url' => getenv('DELAYER_URL') ?: 'redis://127.0.0.1:6379/0']);
$worker = new Worker($client, ttr: 60);         // jobs reserved for 60 s unless said otherwise

$worker->handle('mail', function (Job $job): void {
    $mail = json_decode($job->body, true, 16, JSON_THROW_ON_ERROR); // not JSON: throws
    echo "mail {$job->id} to {$mail['to']}, attempt {$job->attempts}\n";
});

$worker->handle('report', function (Job $job): void {
    foreach (explode(',', $job->body) as $part) {
        echo "report {$job->id}: {$part}\n";    // a long step of your own
        $job->touch();                          // its ttr (10 s) again from now
    }
}, ttr: 10);

$worker->on(function (string $event, array $data): void {
    if ($event === 'job_failed') {              // metrics and logs: see "Events"
        error_log("delayer: {$data['topic']} {$data['id']} failed ({$data['outcome']}): {$data['error']}");
    }
});

$worker->run();                                 // returns after SIGTERM / SIGINT
