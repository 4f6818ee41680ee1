<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;

/**
 * The I/O half of the client (sdk-rust's `connection`): its one Redis
 * connection, and the reason a client outlives a
 * Redis restart: a call that loses the connection raises
 * ConnectionException and drops it, and the next call opens a new one
 * (connect, AUTH, SELECT), blocking or not. phpredis alone does not do this
 * for a connection that failed while it was blocked: every later call got
 * "Redis server ... went away", even once Redis was back.
 *
 * No call is retried: whether a lost call ran in Redis is unknown (a pop
 * may have taken its job), so the caller decides.
 *
 * Every way the client talks to Redis goes through here: scripts
 * ({@see Scripts}), pipelined scripts, and blocking commands. What is sent
 * and what the replies mean is {@see Calls}'s and {@see Replies}'s. Errors keep their kind: a lost
 * socket is ConnectionException (and drops the connection), an error reply
 * RedisErrorException (the connection stays).
 *
 * @internal used by {@see Client}
 */
final class Connection implements RedisLink
{
    /**
     * A pipeline on a connection idle this long (seconds) is preceded by a
     * PING. phpredis reconnects a socket that Redis closed meanwhile (a
     * restart) before a plain command, but a pipeline sent on it runs and
     * then fails with its replies lost. Short: no restart fits in it, and
     * calls closer together than this pay no round trip.
     */
    private const PIPELINE_IDLE_CHECK = 0.1;

    /** The live connection; null before the first call and after one was lost. */
    private ?\Redis $redis = null;

    /** When the last call on the live connection ended (hrtime seconds). */
    private float $lastUsed = 0.0;

    /**
     * @param string $host     what phpredis connects to: a host, "tls://host", or a socket path
     * @param int    $port     the TCP port, 0 for a unix socket
     * @param string $where    where Redis is, for messages: "host:port" or the socket path
     * @param array{stream: array<string, mixed>}|null $context the stream context of a TLS connection
     * @param list<string> $secrets passwords to keep out of messages
     * @param float  $timeout  connect and read timeout, seconds
     */
    public function __construct(
        private readonly string $host,
        private readonly int $port,
        private readonly string $where,
        private readonly ?array $context,
        private readonly ?string $username,
        #[\SensitiveParameter] private readonly ?string $password,
        private readonly int $database,
        private readonly float $timeout,
        #[\SensitiveParameter] private readonly array $secrets,
        private readonly ?Sentinels $sentinels = null,
    ) {
    }

    /**
     * Connects now unless connected.
     *
     * @throws ConnectionException when Redis cannot be reached, refuses the
     *                             credentials (or needs some and has none),
     *                             or refuses the database
     */
    public function open(): void
    {
        $this->redis();
    }

    /**
     * The live phpredis instance (connecting first when there is none), for
     * the `$_driver` of mix/delayer-client 1.x's subclasses. A lost
     * connection replaces it: read it again rather than keep it.
     *
     * @throws ConnectionException
     */
    public function driver(): \Redis|\RedisCluster
    {
        return $this->redis();
    }

    /**
     * {@see Scripts::run()} on the live connection.
     *
     * @param value-of<Scripts::NAMES> $name
     * @param list<string> $keys
     * @param list<string> $argv
     * @throws ConnectionException
     */
    public function script(string $name, array $keys, array $argv): mixed
    {
        return $this->use(static fn (\Redis $redis): mixed => Scripts::run($redis, $name, $keys, $argv));
    }

    /**
     * {@see Scripts::runPipelined()} on the live connection.
     *
     * @param Scripts::PUSH|Scripts::PUSH_MANY $name
     * @param list<array{0: list<string>, 1: list<string>}> $calls
     * @return list<mixed>
     * @throws ConnectionException
     */
    public function pipelined(string $name, array $calls): array
    {
        return $this->use(function (\Redis $redis) use ($name, $calls): array {
            if (self::now() - $this->lastUsed > self::PIPELINE_IDLE_CHECK) {
                try {
                    $redis->ping();
                } catch (\RedisException $e) {
                    throw new ConnectionException("Redis error at {$this->where}: " . $this->scrub($e->getMessage()), 0, $e);
                }
            }
            return Scripts::runPipelined($redis, $name, $calls);
        });
    }

    /**
     * {@see Scripts::runThen()} on the live connection.
     *
     * @param value-of<Scripts::NAMES> $name
     * @param list<string> $keys
     * @param list<string> $argv
     * @param list<array{0: string, 1: list<string>}> $commands
     * @return array{0: mixed, 1: list<mixed>, 2: bool}
     * @throws ConnectionException
     * @throws RedisErrorException
     */
    public function scriptThen(string $name, array $keys, array $argv, array $commands): array
    {
        return $this->use(function (\Redis $redis) use ($name, $keys, $argv, $commands): array {
            if (self::now() - $this->lastUsed > self::PIPELINE_IDLE_CHECK) {
                try {
                    $redis->ping(); // as pipelined(): a pipeline on a dead socket loses its replies
                } catch (\RedisException $e) {
                    throw new ConnectionException("Redis error at {$this->where}: " . $this->scrub($e->getMessage()), 0, $e);
                }
            }
            try {
                return Scripts::runThen($redis, $name, $keys, $argv, $commands);
            } catch (RedisErrorException $e) {
                throw new RedisErrorException($this->scrub($e->getMessage()), 0, $e);
            }
        });
    }

    /**
     * Plain commands (no script), pipelined: one round trip. For the
     * per-topic layout's index write and its numbers (ZADD, SADD, PUBLISH,
     * SSCAN, ZCARD, LLEN).
     *
     * @param list<array{0: string, 1: list<string>}> $commands each command and its arguments
     * @param bool $hints a refused command's reply is a RedisErrorException in the list, not thrown
     * @return list<mixed> the replies, in order
     * @throws ConnectionException
     * @throws RedisErrorException when Redis refused one of them
     */
    public function commands(array $commands, bool $hints = false): array
    {
        return $this->use(function (\Redis $redis) use ($commands, $hints): array {
            $names = implode(', ', array_unique(array_column($commands, 0)));
            try {
                if (self::now() - $this->lastUsed > self::PIPELINE_IDLE_CHECK) {
                    $redis->ping(); // as pipelined(): a pipeline on a dead socket loses its replies
                }
                $redis->clearLastError();
                $redis->multi(\Redis::PIPELINE);
                foreach ($commands as [$command, $args]) {
                    $redis->rawCommand($command, ...$args);
                }
                $replies = $redis->exec();
            } catch (\RedisException $e) {
                // A hint's refusal by Redis (its error code first: OOM,
                // READONLY, ...; a lost connection's text is not one).
                $refused = $hints && preg_match('/^[A-Z][A-Z_-]+ /', $e->getMessage()) === 1;
                if ($refused || str_starts_with($e->getMessage(), 'NOPERM')) {
                    // phpredis raises an ACL refusal (and OOM), mid-pipeline: a
                    // refusal (the kind a caller may tolerate), on a connection
                    // that may still hold unread replies, so it is not used again.
                    $this->drop();
                    throw new RedisErrorException("Redis error running {$names}: " . $this->scrub($e->getMessage()), 0, $e);
                }
                throw new ConnectionException("Redis error running {$names}: " . $this->scrub($e->getMessage()), 0, $e);
            }
            if (!\is_array($replies) || \count($replies) !== \count($commands)) {
                $error = $redis->getLastError() ?? 'the connection failed, the replies are lost';
                throw new ConnectionException("Redis error running {$names}: " . $this->scrub($error));
            }
            $replies = array_values($replies);
            foreach ($replies as $i => $reply) {
                // phpredis gives an error reply as false (no command here answers false)
                if ($reply === false) {
                    $refused = new RedisErrorException("Redis error running {$commands[$i][0]}: "
                        . $this->scrub((string) ($redis->getLastError() ?? 'error reply')));
                    $hints ? $replies[$i] = $refused : throw $refused;
                }
            }
            return $replies;
        });
    }

    /**
     * A blocking command (BRPOP, BLMOVE) whose last argument is the timeout,
     * sent raw with a fractional timeout (phpredis 5 only takes whole
     * seconds), with the socket read timeout raised above the wait for the
     * time of the call (none when waiting forever), so that a long wait is
     * not a socket error whatever the client's timeout or PHP's
     * default_socket_timeout.
     *
     * @param list<string> $args the arguments before the timeout
     * @param float        $wait seconds; 0 waits forever
     * @return mixed the reply, or null on timeout
     * @throws ConnectionException
     * @throws RedisErrorException
     */
    public function blocking(string $command, array $args, float $wait): mixed
    {
        // Rounded up to the millisecond so that we wait at least $wait.
        $waitArg = $wait > 0 ? sprintf('%.3F', ceil($wait * 1000) / 1000) : '0';
        return $this->use(function (\Redis $redis) use ($command, $args, $wait, $waitArg): mixed {
            try {
                $redis->setOption(\Redis::OPT_READ_TIMEOUT, $wait > 0 ? $wait + $this->timeout : -1);
                try {
                    $redis->clearLastError();
                    $reply = $redis->rawCommand($command, ...[...$args, $waitArg]);
                } finally {
                    $redis->setOption(\Redis::OPT_READ_TIMEOUT, $this->timeout);
                }
            } catch (\RedisException $e) {
                throw new ConnectionException("Redis error running {$command}: " . $this->scrub($e->getMessage()), 0, $e);
            }
            // phpredis gives a timeout's nil array (*-1) as [], and an error as false.
            if ($reply === false || $reply === null || $reply === []) {
                if ($reply === false && ($error = $redis->getLastError()) !== null) {
                    throw new RedisErrorException("Redis error running {$command}: " . $this->scrub($error));
                }
                return null;
            }
            return $reply;
        });
    }

    /**
     * WAIT 1 <timeout> on the live connection, after a write on it: how many
     * replicas have every write this connection made (a durable push; one
     * node holds every key, so $keys do not matter).
     *
     * @param list<string> $keys
     * @throws ConnectionException
     */
    public function waitForReplica(float $timeout, array $keys = []): int
    {
        $ms = max(1, (int) round($timeout * 1000));
        return $this->use(function (\Redis $redis) use ($ms): int {
            try {
                $redis->setOption(\Redis::OPT_READ_TIMEOUT, $ms / 1000 + $this->timeout);
                try {
                    $acked = $redis->rawCommand('WAIT', '1', (string) $ms);
                } finally {
                    $redis->setOption(\Redis::OPT_READ_TIMEOUT, $this->timeout);
                }
            } catch (\RedisException $e) {
                throw new ConnectionException('Redis error running WAIT: ' . $this->scrub($e->getMessage()), 0, $e);
            }
            if (!\is_int($acked)) {
                throw new RedisErrorException('Redis error running WAIT: ' . $this->scrub((string) $redis->getLastError()));
            }
            return $acked;
        });
    }

    /** A connection with the same settings, not yet open. */
    public function copy(): RedisLink
    {
        return new self(
            $this->host,
            $this->port,
            $this->where,
            $this->context,
            $this->username,
            $this->password,
            $this->database,
            $this->timeout,
            $this->secrets,
            $this->sentinels,
        );
    }

    /** Closes the connection; a later call opens a new one. */
    public function close(): void
    {
        $this->drop();
    }

    /**
     * Runs $call on the live connection (opening one if needed). A
     * connection that failed under it is dropped, so that the next call
     * connects again.
     *
     * @template T
     * @param \Closure(\Redis): T $call
     * @return T
     * @throws ConnectionException
     */
    private function use(\Closure $call): mixed
    {
        $redis = $this->redis();
        try {
            try {
                $result = $call($redis);
            } catch (RedisErrorException $e) {
                // Sentinel mode: a demoted master refused to write (nothing
                // was written), so the call goes to the master of the moment.
                if ($this->sentinels === null || !str_contains($e->getMessage(), 'READONLY')) {
                    throw $e;
                }
                $this->drop();
                $result = $call($this->redis());
            }
            $this->lastUsed = self::now();
            return $result;
        } catch (ConnectionException $e) {
            // Mostly a socket that failed (read, write, timeout), which
            // phpredis cannot always tell from an error reply: a new
            // connection costs little, using a broken one fails every call.
            $this->drop();
            throw $e;
        } catch (\RedisException $e) {
            $this->drop();
            throw new ConnectionException("Redis error at {$this->where}: " . $this->scrub($e->getMessage()), 0, $e);
        }
    }

    /** @throws ConnectionException */
    private function redis(): \Redis
    {
        if ($this->redis === null) {
            $redis = new \Redis();
            try {
                $this->connect($redis);
            } catch (ConnectionException $e) {
                self::closeQuietly($redis);
                throw $e;
            }
            $this->redis = $redis;
            $this->lastUsed = self::now();
        }
        return $this->redis;
    }

    private function drop(): void
    {
        if ($this->redis !== null) {
            self::closeQuietly($this->redis);
            $this->redis = null;
        }
    }

    private static function now(): float
    {
        return hrtime(true) / 1e9;
    }

    private static function closeQuietly(\Redis $redis): void
    {
        try {
            $redis->close();
        } catch (\RedisException) {
            // already gone
        }
    }

    /**
     * Connects $redis, authenticates, and selects the database; in sentinel
     * mode, to the node the sentinels name, checked to be a master.
     */
    private function connect(\Redis $redis): void
    {
        if ($this->sentinels !== null) {
            [$host, $port] = $this->sentinels->master();
            $bare = str_contains($host, ':') ? "[{$host}]" : $host;
            $context = $this->sentinels->tls() ? ['stream' => $this->sentinels->streamOptions() + ['peer_name' => $host]] : null;
            $this->connectTo($redis, ($this->sentinels->tls() ? 'tls://' : '') . $bare, $port, "{$bare}:{$port}", $context);
            try {
                $role = $redis->rawCommand('ROLE');
            } catch (\RedisException $e) {
                throw new ConnectionException("Redis error at {$bare}:{$port}: " . $this->scrub($e->getMessage()), 0, $e);
            }
            if (!\is_array($role) || ($role[0] ?? null) !== 'master') {
                throw new ConnectionException("{$bare}:{$port} is not a master (a failover is under way)");
            }
            return;
        }
        $this->connectTo($redis, $this->host, $this->port, $this->where, $this->context);
    }

    /**
     * @param array{stream: array<string, mixed>}|null $context
     * @throws ConnectionException
     */
    private function connectTo(\Redis $redis, string $host, int $port, string $where, ?array $context): void
    {
        // A failed TLS handshake is also reported as PHP warnings: their
        // text goes into the exception instead.
        $warnings = [];
        set_error_handler(static function (int $no, string $message) use (&$warnings): bool {
            $warnings[] = trim((string) preg_replace(['/^Redis::connect\(\):\s*/', '/\s+/'], ['', ' '], $message));
            return true;
        });
        try {
            $ok = $context === null
                ? $redis->connect($host, $port, $this->timeout, null, 0, $this->timeout)
                : $redis->connect($host, $port, $this->timeout, null, 0, $this->timeout, $context);
        } catch (\RedisException $e) {
            $detail = implode('; ', [...$warnings, $e->getMessage()]);
            throw new ConnectionException("cannot connect to Redis at {$where}: " . $this->scrub($detail), 0, $e);
        } finally {
            restore_error_handler();
        }
        if (!$ok) {
            $detail = $warnings === [] ? '' : ': ' . implode('; ', $warnings);
            throw new ConnectionException("cannot connect to Redis at {$where}" . $this->scrub($detail));
        }
        $this->authenticate($redis);
        if ($this->database !== 0) {
            try {
                $redis->clearLastError();
                if (!$redis->select($this->database)) {
                    throw new ConnectionException("Redis refused database {$this->database} at {$where}: "
                        . $this->scrub((string) $redis->getLastError()));
                }
            } catch (ConnectionException $e) {
                throw $e; // a \RedisException itself: not to be wrapped again
            } catch (\RedisException $e) {
                throw new ConnectionException("Redis refused database {$this->database} at {$where}: "
                    . $this->scrub($e->getMessage()), 0, $e);
            }
        }
    }

    /**
     * AUTH with the password (and user) given. Without one, a PING asks
     * whether Redis wants one: otherwise the first command would fail with
     * NOAUTH, or a push with "Protocol error: unauthenticated multibulk
     * length" (Redis refuses long commands before AUTH), neither of which
     * says what is wrong.
     *
     * @throws ConnectionException "Redis authentication failed at ...",
     *         never with the password, never chained (the previous
     *         exception's trace would hold Redis::auth()'s arguments)
     */
    private function authenticate(\Redis $redis): void
    {
        $error = null;
        try {
            $redis->clearLastError();
            if ($this->password !== null) {
                $credentials = $this->username !== null ? [$this->username, $this->password] : $this->password;
                if (!$redis->auth($credentials)) {
                    $error = $redis->getLastError() ?? 'AUTH refused';
                }
            } elseif ($redis->ping() === false) {
                $error = (string) $redis->getLastError();
            }
        } catch (\RedisException $e) {
            $error = $e->getMessage();
        }
        if ($this->password === null) {
            // Anything else a PING may meet (an ACL that denies it) is not
            // about credentials: the commands that matter will tell.
            $error = str_starts_with((string) $error, 'NOAUTH')
                ? "Redis requires a password and none was given ({$error})"
                : null;
        }
        if ($error !== null) {
            throw new ConnectionException("Redis authentication failed at {$this->where}: " . $this->scrub($error));
        }
    }

    /** Removes the passwords from a message that is about to be raised. */
    private function scrub(string $message): string
    {
        foreach ($this->secrets as $secret) {
            $message = str_replace($secret, '***', $message);
        }
        return $message;
    }
}
