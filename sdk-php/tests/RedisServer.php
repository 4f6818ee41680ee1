<?php

declare(strict_types=1);

namespace Delayer\Tests;

/**
 * A real redis-server on a free 127.0.0.1 port, in a temporary directory,
 * without persistence. Started by the test bootstrap (and by tests that
 * need a second instance), stopped at the end of the run.
 */
final class RedisServer
{
    public const BINARY = '/usr/bin/redis-server';

    /** @var list<self> every server still running, stopped at shutdown */
    private static array $running = [];

    private static ?self $shared = null;

    /** @var resource|null */
    private $process;

    private function __construct(
        public readonly int $port,
        public readonly string $dir,
        public readonly ?string $password,
    ) {
    }

    /** The instance most tests share (started once by the bootstrap). */
    public static function shared(): self
    {
        return self::$shared ??= self::start();
    }

    /**
     * @param string|null $password run with --requirepass
     */
    public static function start(?string $password = null, float $deadline = 10.0): self
    {
        $port = self::freePort();
        $dir = sys_get_temp_dir() . '/delayer-php-redis-' . getmypid() . '-' . $port . '-' . bin2hex(random_bytes(4));
        if (!mkdir($dir, 0700, true) && !is_dir($dir)) {
            throw new \RuntimeException("cannot create {$dir}");
        }
        $command = [
            self::BINARY,
            '--port', (string) $port,
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', $dir,
            '--daemonize', 'no',
            '--logfile', $dir . '/redis.log',
        ];
        if ($password !== null) {
            array_push($command, '--requirepass', $password);
        }
        $process = proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $dir . '/stderr.log', 'w']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('cannot start ' . self::BINARY);
        }
        $server = new self($port, $dir, $password);
        $server->process = $process;
        self::$running[] = $server;
        $server->waitReady($deadline);
        return $server;
    }

    /** A port nothing listens on right now (bind to port 0, read it back, close). */
    public static function freePort(): int
    {
        $socket = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
        if ($socket === false) {
            throw new \RuntimeException("cannot find a free port: {$errstr}");
        }
        $name = stream_socket_get_name($socket, false);
        fclose($socket);
        $port = (int) substr((string) $name, strrpos((string) $name, ':') + 1);
        if ($port <= 0 || $port === 6379) {
            return self::freePort();
        }
        return $port;
    }

    /** A fresh phpredis connection to this server (authenticated). */
    public function connect(): \Redis
    {
        $redis = new \Redis();
        $redis->connect('127.0.0.1', $this->port, 2.0, null, 0, 5.0);
        if ($this->password !== null) {
            $redis->auth($this->password);
        }
        return $redis;
    }

    private function waitReady(float $deadline): void
    {
        $until = microtime(true) + $deadline;
        $last = '';
        while (microtime(true) < $until) {
            $status = proc_get_status($this->process);
            if (!$status['running']) {
                $log = @file_get_contents($this->dir . '/redis.log') . @file_get_contents($this->dir . '/stderr.log');
                throw new \RuntimeException("redis-server on port {$this->port} exited: {$log}");
            }
            try {
                $redis = $this->connect();
                $pong = $redis->ping();
                $redis->close();
                if ($pong === true || $pong === '+PONG' || $pong === 'PONG') {
                    return;
                }
            } catch (\RedisException $e) {
                $last = $e->getMessage();
            }
            usleep(20000);
        }
        $this->stop();
        throw new \RuntimeException("redis-server on port {$this->port} did not answer PING within {$deadline} s: {$last}");
    }

    public function stop(): void
    {
        if ($this->process !== null) {
            proc_terminate($this->process, SIGTERM);
            $until = microtime(true) + 5.0;
            while (proc_get_status($this->process)['running'] && microtime(true) < $until) {
                usleep(10000);
            }
            if (proc_get_status($this->process)['running']) {
                proc_terminate($this->process, SIGKILL);
            }
            proc_close($this->process);
            $this->process = null;
        }
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
        self::$running = array_values(array_filter(self::$running, fn (self $s): bool => $s !== $this));
        if (self::$shared === $this) {
            self::$shared = null;
        }
    }

    public static function stopAll(): void
    {
        foreach (self::$running as $server) {
            $server->stop();
        }
    }
}
