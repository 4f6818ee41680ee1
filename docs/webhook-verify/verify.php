<?php
// Checks that a request came from `delayer webhook`, unchanged and recent.

const MAX_AGE = 300; // seconds: an older (or replayed) request is refused

/**
 * $timestamp, $signature: the X-Delayer-Timestamp and X-Delayer-Signature
 * headers; $body: the raw request body, before any JSON parsing.
 */
function delayer_verify(string $secret, string $timestamp, string $signature, string $body): bool
{
    if (!ctype_digit($timestamp) || abs(time() - (int) $timestamp) > MAX_AGE) {
        return false;
    }
    $expected = 'sha256=' . hash_hmac('sha256', $timestamp . '.' . $body, $secret);
    return hash_equals($expected, $signature);
}

// In a web request:
// $ok = delayer_verify($secret, $_SERVER['HTTP_X_DELAYER_TIMESTAMP'] ?? '',
//     $_SERVER['HTTP_X_DELAYER_SIGNATURE'] ?? '', file_get_contents('php://input'));

if (PHP_SAPI === 'cli' && realpath($argv[0]) === __FILE__) { // WEBHOOK_SECRET=... php verify.php TIMESTAMP SIGNATURE < body
    $ok = delayer_verify((string) getenv('WEBHOOK_SECRET'), $argv[1], $argv[2], (string) stream_get_contents(STDIN));
    echo $ok ? "valid\n" : "invalid\n";
    exit($ok ? 0 : 1);
}
