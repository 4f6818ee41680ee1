<?php

declare(strict_types=1);

namespace Delayer\Tests;

/**
 * Another process that acts once this test's client is blocked in Redis:
 * how a test makes a job ready, or pauses and resumes a topic, while a
 * blocking call of its own waits (PHP has no threads).
 */
trait BlockedChild
{
    /** Output and error files of the process (its output never goes to PHPUnit's: a shared descriptor garbles its report). */
    private string $childOut = '';
    private string $childErr = '';

    /**
     * Starts a PHP process that waits (polling, up to 10 s) until a client is
     * blocked in Redis, then runs $steps: a command, ['SLEEP', seconds],
     * ['EXPECT', reply, command...] (exit 3 when the reply differs) or
     * ['CLIENT', result, options, method, args...]: a Client's call (with
     * $options, on this server), exit 4 when it returns another result; it
     * prints the time its last step ended.
     *
     * @param list<mixed> ...$steps
     * @return resource the process
     */
    private function whenBlocked(array ...$steps)
    {
        $code = <<<'PHP'
            $r = new Redis();
            $r->connect('127.0.0.1', (int) $argv[1]);
            $until = microtime(true) + 10;
            while ((int) $r->info('clients')['blocked_clients'] < 1) {
                if (microtime(true) > $until) {
                    exit(2);
                }
                usleep(2000);
            }
            foreach (json_decode($argv[2], true) as $step) {
                if ($step[0] === 'SLEEP') {
                    usleep((int) ($step[1] * 1e6));
                } elseif ($step[0] === 'CLIENT') {
                    require_once $argv[3];
                    $client = new \Delayer\Client($step[2] + ['host' => '127.0.0.1', 'port' => (int) $argv[1]]);
                    if ($client->{$step[3]}(...\array_slice($step, 4)) !== $step[1]) {
                        exit(4);
                    }
                } elseif ($step[0] === 'EXPECT') {
                    if ($r->rawCommand(...\array_slice($step, 2)) !== $step[1]) {
                        exit(3);
                    }
                } else {
                    $r->rawCommand(...$step);
                }
            }
            echo microtime(true);
            PHP;
        $this->childOut = (string) tempnam(sys_get_temp_dir(), 'delayer-php-child-');
        $this->childErr = (string) tempnam(sys_get_temp_dir(), 'delayer-php-child-');
        $process = proc_open(
            [PHP_BINARY, '-r', $code, (string) RedisServer::shared()->port, json_encode($steps), \dirname(__DIR__) . '/vendor/autoload.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->childOut, 'w'], 2 => ['file', $this->childErr, 'w']],
            $pipes
        );
        self::assertIsResource($process);
        return $process;
    }

    /**
     * Waits (up to 15 s) for the process of {@see whenBlocked()}.
     *
     * @param resource $process
     * @return array{0: int, 1: float} its exit code and the time it printed
     */
    private function waitForChild($process): array
    {
        $until = microtime(true) + 15;
        while (($status = proc_get_status($process))['running']) {
            if (microtime(true) > $until) {
                proc_terminate($process);
                self::fail('the helper process did not finish');
            }
            usleep(5000);
        }
        proc_close($process);
        [$out, $err] = [(string) @file_get_contents($this->childOut), (string) @file_get_contents($this->childErr)];
        @unlink($this->childOut);
        @unlink($this->childErr);
        self::assertSame('', $err, 'the helper process wrote errors');
        return [$status['exitcode'], (float) $out];
    }
}
