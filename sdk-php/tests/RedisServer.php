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

    /** @var list<string> the redis-server command line, for restart() */
    private array $command = [];

    private function __construct(
        public readonly int $port,
        public readonly string $dir,
        public readonly ?string $password,
        /** @var array{cert: string, key: string, ca: string}|null */
        public readonly ?array $tls = null,
        public readonly ?string $socket = null,
    ) {
    }

    /** The instance most tests share (started once by the bootstrap). */
    public static function shared(): self
    {
        return self::$shared ??= self::start();
    }

    /**
     * @param string|null $password run with --requirepass
     * @param list<string> $args    more redis-server arguments (ACL users, ...)
     * @param array{cert: string, key: string, ca: string}|null $tls serve TLS
     *        only (--port 0, --tls-port), with this certificate, key and CA
     * @param bool $socket also listen on <dir>/redis.sock
     */
    public static function start(?string $password = null, float $deadline = 10.0, array $args = [], ?array $tls = null, bool $socket = false): self
    {
        $port = self::freePort();
        $dir = sys_get_temp_dir() . '/delayer-php-redis-' . getmypid() . '-' . $port . '-' . bin2hex(random_bytes(4));
        if (!mkdir($dir, 0700, true) && !is_dir($dir)) {
            throw new \RuntimeException("cannot create {$dir}");
        }
        $command = [self::BINARY];
        if ($tls === null) {
            array_push($command, '--port', (string) $port);
        } else {
            array_push(
                $command,
                '--port', '0',
                '--tls-port', (string) $port,
                '--tls-cert-file', $tls['cert'],
                '--tls-key-file', $tls['key'],
                '--tls-ca-cert-file', $tls['ca'],
                '--tls-auth-clients', 'no',
            );
        }
        array_push(
            $command,
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', $dir,
            '--daemonize', 'no',
            '--logfile', $dir . '/redis.log',
        );
        if ($password !== null) {
            array_push($command, '--requirepass', $password);
        }
        $socketPath = $socket ? $dir . '/redis.sock' : null;
        if ($socketPath !== null) {
            array_push($command, '--unixsocket', $socketPath, '--unixsocketperm', '700');
        }
        array_push($command, ...$args);
        $server = new self($port, $dir, $password, $tls, $socketPath);
        $server->command = $command;
        self::$running[] = $server;
        $server->launch($deadline);
        return $server;
    }

    /**
     * Stops redis-server (SIGTERM, as a restart by an operator) and leaves
     * it stopped: the port refuses connections until {@see restart()}.
     */
    public function kill(): void
    {
        $this->terminate();
    }

    /** The redis-server process id (0 when stopped). */
    public function pid(): int
    {
        return $this->process === null ? 0 : (int) proc_get_status($this->process)['pid'];
    }

    /** Whether redis-server still runs (it may have been stopped by a signal from elsewhere). */
    public function running(): bool
    {
        return $this->process !== null && proc_get_status($this->process)['running'];
    }

    /** Starts redis-server again on the same port (empty: no persistence); stops it first if it runs. */
    public function restart(float $deadline = 10.0): void
    {
        $this->terminate();
        $this->launch($deadline);
    }

    private function launch(float $deadline): void
    {
        $process = proc_open($this->command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $this->dir . '/stderr.log', 'w']], $pipes);
        if (!\is_resource($process)) {
            throw new \RuntimeException('cannot start ' . self::BINARY);
        }
        $this->process = $process;
        $this->waitReady($deadline);
    }

    /**
     * A CA, and a server certificate for 127.0.0.1 signed by it, made with
     * the openssl CLI in $dir.
     *
     * @return array{cert: string, key: string, ca: string} PEM files
     */
    public static function makeCertificates(string $dir): array
    {
        $openssl = static function (string ...$args) use ($dir): void {
            $process = proc_open(['openssl', ...$args], [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes, $dir);
            if (!\is_resource($process)) {
                throw new \RuntimeException('cannot run openssl');
            }
            $err = stream_get_contents($pipes[2]);
            fclose($pipes[2]);
            if (proc_close($process) !== 0) {
                throw new \RuntimeException('openssl ' . implode(' ', $args) . ": {$err}");
            }
        };
        $openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=delayer test CA');
        $openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
        file_put_contents($dir . '/ext.cnf', "subjectAltName=IP:127.0.0.1\n");
        $openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf');
        return ['cert' => $dir . '/server.pem', 'key' => $dir . '/server.key', 'ca' => $dir . '/ca.pem'];
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

    /** A fresh phpredis connection to this server (authenticated; over TLS, trusting the test CA). */
    public function connect(): \Redis
    {
        $redis = new \Redis();
        if ($this->tls !== null) {
            $redis->connect('tls://127.0.0.1', $this->port, 2.0, null, 0, 5.0, ['stream' => ['cafile' => $this->tls['ca'], 'verify_peer' => true, 'peer_name' => '127.0.0.1']]);
        } else {
            $redis->connect('127.0.0.1', $this->port, 2.0, null, 0, 5.0);
        }
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
            $listening = @fsockopen('127.0.0.1', $this->port, $errno, $errstr, 1.0);
            if ($listening !== false) {
                fclose($listening);
                try {
                    $redis = $this->connect();
                    $pong = $redis->ping();
                    $error = (string) $redis->getLastError();
                    $redis->close();
                    if ($pong === false && str_contains($error, 'NOAUTH')) {
                        return; // it answers: "default" is off in the ACL tests
                    }
                    if (($pong === true || $pong === '+PONG' || $pong === 'PONG') && ($this->socket === null || file_exists($this->socket))) {
                        return;
                    }
                } catch (\RedisException $e) {
                    $last = $e->getMessage();
                    if (str_contains($last, 'NOAUTH')) {
                        return; // it answers: "default" is off in the ACL tests
                    }
                }
            }
            usleep(20000);
        }
        $this->stop();
        throw new \RuntimeException("redis-server on port {$this->port} did not answer PING within {$deadline} s: {$last}");
    }

    public function stop(): void
    {
        $this->terminate();
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
        self::$running = array_values(array_filter(self::$running, fn (self $s): bool => $s !== $this));
        if (self::$shared === $this) {
            self::$shared = null;
        }
    }

    private function terminate(): void
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
    }

    public static function stopAll(): void
    {
        foreach (self::$running as $server) {
            $server->stop();
        }
    }
}
