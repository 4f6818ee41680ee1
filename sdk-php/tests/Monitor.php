<?php

declare(strict_types=1);

namespace Delayer\Tests;

/**
 * MONITOR on its own socket: the commands of every connection but one (the
 * test's own), up to a marker that connection sends; not the commands a
 * script runs, nor PING (a pipeline's liveness check).
 */
final class Monitor
{
    /** @var resource */
    private $socket;

    public function __construct(int $port, private readonly string $skip)
    {
        $socket = stream_socket_client("tcp://127.0.0.1:{$port}", $errno, $error, 5);
        if ($socket === false) {
            throw new \RuntimeException("cannot connect: {$error}");
        }
        $this->socket = $socket;
        stream_set_timeout($this->socket, 10);
        fwrite($this->socket, "*1\r\n$7\r\nMONITOR\r\n");
        if (fgets($this->socket) !== "+OK\r\n") {
            throw new \RuntimeException('MONITOR failed');
        }
    }

    /**
     * The names of the commands seen since the last marker, then sends and
     * waits for the next one (ECHO from the skipped connection).
     *
     * @return list<string>
     */
    public function commandsUntilMarker(\Redis $redis, string $name): array
    {
        $marker = 'marker ' . $name;
        $redis->rawCommand('ECHO', $marker);
        $seen = [];
        while (($line = fgets($this->socket)) !== false) {
            // +1700000000.123456 [0 127.0.0.1:54321] "EVALSHA" "..." ...
            if (preg_match('/^\+\d+\.\d+ \[\d+ (\S+)\] "([^"]+)"(.*)$/', rtrim($line, "\r\n"), $m) !== 1) {
                continue;
            }
            if ($m[1] === 'lua' || $m[2] === 'PING') { // what a script runs; the liveness check before a pipeline
                continue;
            }
            if ($m[1] === $this->skip) {
                if ($m[2] === 'ECHO' && str_contains($m[3], $marker)) {
                    return $seen;
                }
                continue;
            }
            $seen[] = strtoupper($m[2]);
        }
        throw new \RuntimeException("no marker for {$name}");
    }

    public function close(): void
    {
        fclose($this->socket);
    }
}
