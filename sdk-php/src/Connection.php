<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\ProtocolException;
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

    /** Connects now unless connected: ConnectionException when Redis cannot be reached, or refuses the credentials or database. */
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

    /** One script call: {@see pipelined()} with one call. */
    public function script(string $name, array $keys, array $argv): mixed
    {
        return $this->pipelined($name, [[$keys, $argv]])[0];
    }

    /**
     * The one EVALSHA path of this SDK: runs a script once per call by its
     * SHA1, and loads it (SCRIPT LOAD) when Redis answers NOSCRIPT (after a
     * restart or SCRIPT FLUSH), then runs the call again (nothing ran).
     * Several calls go in one pipeline (one round trip); a call whose reply
     * is false there (an error, NOSCRIPT among them: phpredis says which
     * only for the last) is run again alone, which loads the script,
     * answers or raises. So several calls are only for scripts that never
     * reply nil and may run again after an error reply (push.lua,
     * push_many.lua). A nil reply is false.
     *
     * @param value-of<Scripts::NAMES> $name
     * @param list<array{0: list<string>, 1: list<string>}> $calls KEYS and ARGV of each call
     * @return list<mixed> the replies, in order
     * @throws ConnectionException|RedisErrorException|ProtocolException
     */
    public function pipelined(string $name, array $calls): array
    {
        $what = "{$name}.lua";
        return $this->use($what, function (\Redis $redis) use ($name, $calls, $what): array {
            $sha = Scripts::sha($name);
            $replies = \count($calls) < 2 ? array_fill(0, \count($calls), false) : $this->pipeline(
                $redis,
                $what,
                \count($calls),
                static function (\Redis $redis) use ($sha, $calls): void {
                    foreach ($calls as [$keys, $argv]) {
                        $redis->evalSha($sha, [...$keys, ...$argv], \count($keys));
                    }
                },
            );
            foreach ($replies as $i => $reply) {
                for ($loaded = false; $reply === false; $loaded = true) {
                    [$keys, $argv] = $calls[$i];
                    $redis->clearLastError();
                    $reply = $redis->evalSha($sha, [...$keys, ...$argv], \count($keys));
                    $error = $reply === false ? $redis->getLastError() : null; // nil is false too, without an error
                    if ($error === null) {
                        break;
                    }
                    if ($loaded || !str_starts_with($error, 'NOSCRIPT')) {
                        throw $this->fail($what, $error);
                    }
                    $redis->clearLastError();
                    $loadedSha = $redis->script('load', Scripts::source($name));
                    if (!\is_string($loadedSha) || strtolower($loadedSha) !== $sha) {
                        throw $this->fail("SCRIPT LOAD of {$what}", $redis->getLastError() ?? 'unexpected reply ' . get_debug_type($loadedSha));
                    }
                }
                $replies[$i] = $reply;
            }
            return $replies;
        });
    }

    /**
     * Plain commands (no script), pipelined: one round trip. For the
     * per-topic layout's numbers (SSCAN, ZCARD, LLEN), and a cluster's
     * CLUSTER SLOTS and ASKING.
     *
     * @param list<array{0: string, 1: list<string>}> $commands each command and its arguments
     * @return list<mixed> the replies, in order
     * @throws ConnectionException
     * @throws RedisErrorException when Redis refused one of them
     */
    public function commands(array $commands): array
    {
        $what = implode(', ', array_unique(array_column($commands, 0)));
        return $this->use($what, function (\Redis $redis) use ($commands, $what): array {
            $replies = $this->pipeline($redis, $what, \count($commands), static function (\Redis $redis) use ($commands): void {
                foreach ($commands as [$command, $args]) {
                    $redis->rawCommand($command, ...$args);
                }
            });
            foreach ($replies as $i => $reply) {
                // phpredis gives an error reply as false (no command here answers false)
                if ($reply === false) {
                    throw $this->fail($commands[$i][0], $redis->getLastError() ?? 'error reply');
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
        $reply = $this->raw($command, [...$args, $waitArg], $wait > 0 ? $wait + $this->timeout : -1);
        // phpredis gives a timeout's nil array (*-1) as [].
        return $reply === false || $reply === [] ? null : $reply;
    }

    /**
     * WAIT 1 <timeout> on the live connection, after a write on it: how many
     * replicas have every write this connection made (a durable push; one
     * node holds every key, so $keys do not matter).
     *
     * @param list<string> $keys
     * @throws ConnectionException|RedisErrorException
     */
    public function waitForReplica(float $timeout, array $keys = []): int
    {
        $ms = max(1, (int) round($timeout * 1000));
        $acked = $this->raw('WAIT', ['1', (string) $ms], $ms / 1000 + $this->timeout);
        return \is_int($acked) ? $acked : throw $this->fail('WAIT', 'unexpected reply ' . get_debug_type($acked));
    }

    /** A connection with the same settings, not yet open. */
    public function copy(): RedisLink
    {
        $copy = clone $this;
        $copy->redis = null;
        return $copy;
    }

    /**
     * Runs $call on the live connection (opening one if needed). A
     * connection that failed under it is dropped, so that the next call
     * connects again; what phpredis raised is mapped by {@see fail()}.
     *
     * @template T
     * @param string $what the command or script, for messages
     * @param \Closure(\Redis): T $call
     * @return T
     * @throws ConnectionException|RedisErrorException
     */
    private function use(string $what, \Closure $call): mixed
    {
        for ($retry = $this->sentinels !== null; ; $retry = false) {
            try {
                $result = $call($this->redis());
                $this->lastUsed = self::now();
                return $result;
            } catch (\RedisException $e) { // ConnectionException is one
                // Mostly a socket that failed (read, write, timeout), which
                // phpredis cannot always tell from an error reply, or a
                // refusal raised mid-reply: a new connection costs little,
                // using a broken one fails every call.
                $this->close();
                throw $e instanceof ConnectionException ? $e : $this->fail($what, $e);
            } catch (RedisErrorException $e) {
                // Sentinel mode: a demoted master refused to write (nothing
                // was written), so the call goes once to the master of the moment.
                if (!$retry || !str_contains($e->getMessage(), 'READONLY')) {
                    throw $e;
                }
                $this->close();
            }
        }
    }

    /**
     * The one error mapping of this SDK: what phpredis reported, as the
     * exception a caller acts on, with the passwords scrubbed. An error
     * reply (getLastError()'s text), or an ACL refusal phpredis raises
     * (NOPERM), is a RedisErrorException: calling again does not cure it.
     * Anything else raised is a lost or broken socket: ConnectionException,
     * after which the next call connects again.
     */
    private function fail(string $what, \RedisException|string $why): ConnectionException|RedisErrorException
    {
        $text = \is_string($why) ? $why : $why->getMessage();
        $message = "Redis error running {$what}: " . $this->scrub($text);
        return \is_string($why) || str_starts_with($text, 'NOPERM')
            ? new RedisErrorException($message, 0, \is_string($why) ? null : $why)
            : new ConnectionException($message, 0, $why);
    }

    /**
     * One command raw, with the socket read timeout set to $readTimeout
     * (-1: none) for it; false for a nil reply.
     *
     * @param list<string> $args
     */
    private function raw(string $command, array $args, float $readTimeout): mixed
    {
        return $this->use($command, function (\Redis $redis) use ($command, $args, $readTimeout): mixed {
            $redis->setOption(\Redis::OPT_READ_TIMEOUT, $readTimeout);
            try {
                $redis->clearLastError();
                $reply = $redis->rawCommand($command, ...$args);
            } finally {
                $redis->setOption(\Redis::OPT_READ_TIMEOUT, $this->timeout);
            }
            if (($reply === false || $reply === null) && ($error = $redis->getLastError()) !== null) {
                throw $this->fail($command, $error);
            }
            return $reply ?? false;
        });
    }

    /**
     * Sends what $queue queues on $redis as one pipeline: $n replies, in order.
     *
     * @param \Closure(\Redis): void $queue
     * @return list<mixed>
     * @throws ConnectionException when the replies are lost
     */
    private function pipeline(\Redis $redis, string $what, int $n, \Closure $queue): array
    {
        $this->pingIfIdle($redis);
        $redis->clearLastError();
        $redis->pipeline();
        $queue($redis);
        $replies = $redis->exec();
        if (!\is_array($replies) || \count($replies) !== $n) {
            // phpredis lost the connection under the pipeline (its commands may have run)
            throw new ConnectionException("Redis error running {$what}: "
                . $this->scrub($redis->getLastError() ?? 'the connection failed, the replies are lost'));
        }
        return array_values($replies);
    }

    /**
     * A PING first when the connection was idle: phpredis reconnects a
     * socket that Redis closed meanwhile (a restart) before a plain
     * command, but a pipeline sent on it runs and then fails with its
     * replies lost.
     */
    private function pingIfIdle(\Redis $redis): void
    {
        if (self::now() - $this->lastUsed > self::PIPELINE_IDLE_CHECK) {
            $redis->ping();
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

    /** Closes the connection; a later call opens a new one. */
    public function close(): void
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
            $bare = Sentinels::bracketed($host);
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
        return self::scrubbed($this->secrets, $message);
    }

    /**
     * $message with each secret replaced by "***" (a cluster's messages too).
     *
     * @param list<string> $secrets
     */
    public static function scrubbed(array $secrets, string $message): string
    {
        return str_replace($secrets, '***', $message);
    }
}
