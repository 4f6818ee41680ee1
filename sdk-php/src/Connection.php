<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

/**
 * One Redis connection (a node, or the master the sentinels name) and the
 * one EVALSHA/NOSCRIPT path and error mapping of this SDK. A call that loses
 * the socket drops it, so the next call connects again (phpredis alone kept
 * failing with "went away"). Nothing is retried: whether a lost call ran is unknown.
 *
 * @internal used by {@see Client}
 */
final class Connection implements RedisLink
{
    /** Idle seconds after which a pipeline is preceded by a PING: phpredis reconnects a socket Redis closed before a plain command, not a pipeline. */
    private const PIPELINE_IDLE_CHECK = 0.1;

    /** How a script refuses its input (PROTOCOL.md): the rest of the error is why. */
    private const INVALID_ARGUMENT = 'ERR invalid argument: ';

    private ?\Redis $redis = null;

    private float $lastUsed = 0.0;

    /**
     * @param string $host  what phpredis connects to: a host, "tls://host", or a socket path (port 0)
     * @param string $where where Redis is, for messages
     * @param array{stream: array<string, mixed>}|null $context
     * @param list<string> $secrets passwords to keep out of messages
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
     * The node at $host:$port (an IPv6 address bare), over TLS with the ssl options $tls unless null.
     *
     * @param array<string, mixed>|null $tls
     * @param list<string> $secrets
     */
    public static function to(string $host, int $port, ?array $tls, ?string $username, #[\SensitiveParameter] ?string $password, float $timeout, #[\SensitiveParameter] array $secrets): self
    {
        $bare = Sentinels::bracketed($host);
        return new self(($tls !== null ? 'tls://' : '') . $bare, $port, "{$bare}:{$port}", $tls === null ? null : ['stream' => $tls + ['peer_name' => $host]],
            $username, $password, 0, $timeout, $secrets);
    }

    public function open(): void
    {
        $this->redis();
    }

    public function driver(): \Redis|\RedisCluster
    {
        return $this->redis();
    }

    public function script(string $name, array $keys, array $argv): mixed
    {
        return $this->pipelined($name, [[$keys, $argv]])[0];
    }

    /**
     * The one EVALSHA path, one pipeline for several calls. A call answered false
     * (an error, which phpredis names only for the last; or nil) runs again alone,
     * after SCRIPT LOAD on NOSCRIPT: so several calls only for scripts that never
     * reply nil and may run again after an error (push.lua, push_many.lua).
     */
    public function pipelined(string $name, array $calls): array
    {
        $what = "{$name}.lua";
        return $this->use($what, function (\Redis $redis) use ($name, $calls, $what): array {
            $sha = Scripts::sha($name);
            $replies = \count($calls) < 2 ? array_fill(0, \count($calls), false)
                : $this->pipeline($redis, $what, \count($calls), static function (\Redis $redis) use ($sha, $calls): void {
                    foreach ($calls as [$keys, $argv]) {
                        $redis->evalSha($sha, [...$keys, ...$argv], \count($keys));
                    }
                });
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

    /** Plain commands, pipelined (the per-topic numbers, CLUSTER SLOTS, ASKING, SENTINEL); false for nil. */
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
                // phpredis gives an error reply as false, and a nil too, without an error
                if ($reply === false && ($error = $redis->getLastError()) !== null) {
                    throw $this->fail($commands[$i][0], $error);
                }
            }
            return $replies;
        });
    }

    /** Sent raw with a fractional timeout (phpredis 5 takes whole seconds), the read timeout above the wait. */
    public function blocking(string $command, array $args, float $wait): mixed
    {
        // Rounded up to the millisecond so that we wait at least $wait.
        $waitArg = $wait > 0 ? sprintf('%.3F', ceil($wait * 1000) / 1000) : '0';
        $reply = $this->raw($command, [...$args, $waitArg], $wait > 0 ? $wait + $this->timeout : -1);
        // phpredis gives a timeout's nil array (*-1) as [].
        return $reply === false || $reply === [] ? null : $reply;
    }

    /** WAIT 1: replicas holding every write this connection made (one node: $keys do not matter). */
    public function waitForReplica(float $timeout, array $keys = []): int
    {
        $ms = max(1, (int) round($timeout * 1000));
        $acked = $this->raw('WAIT', ['1', (string) $ms], $ms / 1000 + $this->timeout);
        return \is_int($acked) ? $acked : throw $this->fail('WAIT', 'unexpected reply ' . get_debug_type($acked));
    }

    public function copy(): RedisLink
    {
        $copy = clone $this;
        $copy->redis = null;
        return $copy;
    }

    /**
     * Runs $call on the live connection; one that failed under it is dropped.
     *
     * @template T
     * @param \Closure(\Redis): T $call
     * @return T
     */
    private function use(string $what, \Closure $call): mixed
    {
        for ($retry = $this->sentinels !== null; ; $retry = false) {
            try {
                $result = $call($this->redis());
                $this->lastUsed = BlockingWait::now();
                return $result;
            } catch (\RedisException $e) { // ConnectionException is one
                // Mostly a failed socket (phpredis cannot always tell): a new connection costs little.
                $this->close();
                throw $e instanceof ConnectionException ? $e : $this->fail($what, $e);
            } catch (RedisErrorException $e) {
                // Sentinel mode: a demoted master wrote nothing; once more, to the master of the moment.
                if (!$retry || !str_contains($e->getMessage(), 'READONLY')) {
                    throw $e;
                }
                $this->close();
            }
        }
    }

    /**
     * The one error mapping: an error reply or NOPERM is RedisErrorException, anything else raised a broken socket;
     * a script's refusal of its input ("ERR invalid argument: <why>") is InvalidArgumentException(<why>), as if this
     * SDK had refused it (the script holds the rule, e.g. flow.lua's rate limits, so every client says the same).
     */
    private function fail(string $what, \RedisException|string $why): ConnectionException|RedisErrorException|InvalidArgumentException
    {
        if (\is_string($why) && str_starts_with($why, self::INVALID_ARGUMENT)) {
            // not scrubbed: the script only echoes the call's arguments, and a secret's replacement would garble <why>
            return new InvalidArgumentException(substr($why, \strlen(self::INVALID_ARGUMENT)));
        }
        $text = \is_string($why) ? $why : $why->getMessage();
        $message = "Redis error running {$what}: " . $this->scrub($text);
        return \is_string($why) || str_starts_with($text, 'NOPERM')
            ? new RedisErrorException($message, 0, \is_string($why) ? null : $why)
            : new ConnectionException($message, 0, $why);
    }

    /**
     * One command with the read timeout $readTimeout (-1: none); false for nil.
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
     * @param \Closure(\Redis): void $queue queues the pipeline's $n commands
     * @return list<mixed>
     */
    private function pipeline(\Redis $redis, string $what, int $n, \Closure $queue): array
    {
        if (BlockingWait::now() - $this->lastUsed > self::PIPELINE_IDLE_CHECK) {
            $redis->ping();
        }
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
            $this->lastUsed = BlockingWait::now();
        }
        return $this->redis;
    }

    public function close(): void
    {
        if ($this->redis !== null) {
            self::closeQuietly($this->redis);
            $this->redis = null;
        }
    }

    public static function closeQuietly(\Redis|\RedisCluster $redis): void
    {
        try {
            $redis->close();
        } catch (\RedisException|\RedisClusterException) {
            // already gone
        }
    }

    /** Connects, authenticates, selects; in sentinel mode to the node the sentinels name, checked to be a master. */
    private function connect(\Redis $redis): void
    {
        [$host, $port, $where, $context] = [$this->host, $this->port, $this->where, $this->context];
        if ($this->sentinels !== null) {
            [$master, $port] = $this->sentinels->master();
            $to = self::to($master, $port, $this->sentinels->tls, null, null, $this->timeout, []);
            [$host, $where, $context] = [$to->host, $to->where, $to->context];
        }
        // A failed TLS handshake is reported as PHP warnings: their text goes into the exception.
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
            $raised = null;
            try {
                $redis->clearLastError();
                $selected = $redis->select($this->database);
            } catch (\RedisException $raised) {
                $selected = false;
            }
            if (!$selected) {
                $why = $raised?->getMessage() ?? (string) $redis->getLastError();
                throw new ConnectionException("Redis refused database {$this->database} at {$where}: " . $this->scrub($why), 0, $raised);
            }
        }
        if ($this->sentinels !== null) {
            try {
                $role = $redis->rawCommand('ROLE');
            } catch (\RedisException $e) {
                throw new ConnectionException("Redis error at {$where}: " . $this->scrub($e->getMessage()), 0, $e);
            }
            if (!\is_array($role) || ($role[0] ?? null) !== 'master') {
                throw new ConnectionException("{$where} is not a master (a failover is under way)");
            }
        }
    }

    /** AUTH, or without a password a PING asking whether Redis wants one; never chained (the trace would hold the password). */
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
            // Anything else (an ACL denying PING) is not about credentials.
            $error = str_starts_with((string) $error, 'NOAUTH')
                ? "Redis requires a password and none was given ({$error})"
                : null;
        }
        if ($error !== null) {
            throw new ConnectionException("Redis authentication failed at {$this->where}: " . $this->scrub($error));
        }
    }

    private function scrub(string $message): string
    {
        return self::scrubbed($this->secrets, $message);
    }

    /** @param list<string> $secrets */
    public static function scrubbed(array $secrets, string $message): string
    {
        return str_replace($secrets, '***', $message);
    }
}
