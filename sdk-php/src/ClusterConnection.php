<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;

/**
 * Redis Cluster ([redis] mode = cluster, option `cluster`): the client's
 * link to a cluster through phpredis's RedisCluster, and the config rule.
 *
 * A cluster spreads keys over its masters by hash slot; in the per-topic
 * layout (the only one a cluster can run: the classic layout keeps every
 * job in one key) each script call touches one topic's slot, and
 * RedisCluster sends it to that slot's master (EVALSHA by its first key),
 * following MOVED and ASK. What differs from one node:
 * - RedisCluster has no pipelines, so the index write, the wake-up and the
 *   per-topic numbers are sent one command at a time, each to its key's
 *   node (`<prefix>due`, `<prefix>topics` and the topic live in different
 *   slots: one node's pipeline could not hold them);
 * - a script a node does not know (NOSCRIPT: a new or restarted node) is
 *   loaded on that node (SCRIPT LOAD routed by the same key) and run again;
 * - RedisCluster's read timeout is fixed when it connects, so blocking
 *   waits go through a second RedisCluster whose read timeout outlasts
 *   {@see BLOCK_SLICE}, and longer waits are cut into slices (an empty
 *   BRPOP or BLMOVE changes nothing, so slicing is invisible);
 * - WAIT (a durable push) asks the node of each key written, on the
 *   connection that wrote, so that connection's read timeout covers it.
 * A call cut by a failover or a cluster that is down (CLUSTERDOWN,
 * TRYAGAIN, MASTERDOWN) raises ConnectionException and drops both
 * RedisClusters: the next call maps the cluster again from the seeds and
 * finds the promoted replica. Nothing is retried, as on one node.
 *
 * @internal used by {@see Client}, {@see Options} and {@see Sentinels}
 */
final class ClusterConnection implements RedisLink
{
    /** The longest one blocking command waits (seconds); longer waits are sent in slices. */
    public const BLOCK_SLICE = 30.0;

    /** Error replies that mean "the cluster is changing": transient, like a lost socket. */
    private const TRANSIENT = ['CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN', 'LOADING'];

    /** Keys that name one fixed address, or the sentinels' master (the Rust reader's NOT_IN_CLUSTER). */
    private const NOT_IN_CLUSTER = ['url', 'host', 'port', 'master_name', 'sentinel_username', 'sentinel_password'];

    private ?\RedisCluster $cluster = null;

    /** The RedisCluster for blocking commands (a read timeout above BLOCK_SLICE). */
    private ?\RedisCluster $blocker = null;

    /**
     * @param list<string> $seeds "host:port" of the seed nodes
     * @param array<string, mixed>|null $tls TLS stream options (null: no TLS)
     * @param float $timeout connect timeout, and read timeout of plain commands
     * @param float $writeWait the longest WAIT a durable push sends (0 without the option):
     *                         added to the read timeout
     * @param list<string> $secrets passwords to keep out of messages
     */
    public function __construct(
        public readonly array $seeds,
        private readonly ?string $username,
        #[\SensitiveParameter] private readonly ?string $password,
        private readonly ?array $tls,
        private readonly float $timeout,
        private readonly float $writeWait,
        #[\SensitiveParameter] private readonly array $secrets,
    ) {
    }

    /**
     * The server's rule for [redis] mode = cluster (sdk-rust/src/cluster.rs),
     * with its messages and in its order: no fixed address or sentinel keys,
     * database 0, seed nodes required, tls yes or no; and the per-topic
     * layout.
     *
     * @param \Closure(string): ?string $get a [redis] value, null when absent or empty
     * @param \Closure(string, string): ConfigException $error an error about a [redis] key
     * @return array{cluster: list<string>, cluster_tls: bool} the constructor options
     * @throws ConfigException
     */
    public static function readConfig(\Closure $get, \Closure $error, string $layout): array
    {
        foreach (self::NOT_IN_CLUSTER as $key) {
            if ($get($key) !== null) {
                throw $error($key, 'not used with mode = cluster: the nodes name the cluster');
            }
        }
        $database = $get('database');
        if ($database !== null && $database !== '0') {
            throw $error('database', 'Redis Cluster has only database 0');
        }
        $nodes = $get('nodes');
        if ($nodes === null) {
            throw $error('mode', 'mode = cluster needs nodes (seed nodes: host:port,host:port,...)');
        }
        $tls = $get('tls');
        if (!\in_array($tls, [null, 'yes', 'no', 'true', 'false'], true)) {
            throw $error('tls', Sentinels::quoted((string) $tls) . ' is not yes or no');
        }
        try {
            $parsed = Sentinels::parseNodes($nodes);
        } catch (\InvalidArgumentException $bad) {
            throw $error('nodes', Sentinels::quoted($bad->getMessage()) . ' is not host:port');
        }
        if ($layout !== Keys::TOPIC) {
            throw $error('mode', 'mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)');
        }
        return ['cluster' => self::seedList($parsed), 'cluster_tls' => \in_array($tls, ['yes', 'true'], true)];
    }

    /**
     * The cluster option: "host:port,..." or a list of "host:port" (or
     * [host, port]), as phpredis takes seeds ("[::1]:7000" for IPv6).
     *
     * @return list<string>
     * @throws \InvalidArgumentException with what is wrong
     */
    public static function seeds(mixed $given): array
    {
        if (\is_string($given)) {
            $given = explode(',', $given);
        }
        if (!\is_array($given) || $given === [] || !array_is_list($given)) {
            throw new \InvalidArgumentException('must be "host:port,..." or a list of "host:port"');
        }
        $nodes = [];
        foreach ($given as $node) {
            if (\is_array($node) && array_is_list($node) && \count($node) === 2 && \is_string($node[0]) && \is_int($node[1])) {
                $node = (str_contains($node[0], ':') ? "[{$node[0]}]" : $node[0]) . ":{$node[1]}";
            }
            if (!\is_string($node)) {
                throw new \InvalidArgumentException('each node is "host:port", got ' . get_debug_type($node));
            }
            try {
                array_push($nodes, ...Sentinels::parseNodes($node));
            } catch (\InvalidArgumentException $bad) {
                throw new \InvalidArgumentException(json_encode($bad->getMessage(), JSON_UNESCAPED_SLASHES) . ' is not host:port');
            }
        }
        return self::seedList($nodes);
    }

    /**
     * @param list<array{0: string, 1: int}> $nodes
     * @return list<string>
     */
    private static function seedList(array $nodes): array
    {
        return array_map(static fn (array $n): string => (str_contains($n[0], ':') ? "[{$n[0]}]" : $n[0]) . ":{$n[1]}", $nodes);
    }

    public function open(): void
    {
        $this->cluster();
    }

    public function driver(): \Redis|\RedisCluster
    {
        return $this->cluster();
    }

    public function script(string $name, array $keys, array $argv): mixed
    {
        return $this->use("{$name}.lua", fn (\RedisCluster $c): mixed => Scripts::run($c, $name, $keys, $argv));
    }

    /** One call after the other: RedisCluster has no pipelines, and the calls may go to different nodes. */
    public function pipelined(string $name, array $calls): array
    {
        $replies = [];
        foreach ($calls as [$keys, $argv]) {
            $replies[] = $this->script($name, $keys, $argv);
        }
        return $replies;
    }

    /** One command after the other, each sent to its key's node. */
    public function commands(array $commands): array
    {
        $replies = [];
        foreach ($commands as [$command, $args]) {
            $replies[] = $this->use($command, function (\RedisCluster $c) use ($command, $args): mixed {
                $c->clearLastError();
                $reply = $c->rawCommand($args[0], $command, ...$args);
                // phpredis gives an error reply as false (no command here answers false)
                if ($reply === false) {
                    throw new RedisErrorException("Redis error running {$command}: " . ($c->getLastError() ?? 'error reply'));
                }
                return $reply;
            });
        }
        return $replies;
    }

    public function blocking(string $command, array $args, float $wait): mixed
    {
        $forever = $wait <= 0;
        $deadline = hrtime(true) / 1e9 + $wait;
        while (true) {
            $slice = $forever ? self::BLOCK_SLICE : min(self::BLOCK_SLICE, max(0.001, $deadline - hrtime(true) / 1e9));
            // Rounded up to the millisecond so that we wait at least $slice.
            $waitArg = sprintf('%.3F', ceil($slice * 1000) / 1000);
            $reply = $this->use($command, function () use ($command, $args, $waitArg): mixed {
                $c = $this->blocker();
                $c->clearLastError();
                $reply = $c->rawCommand($args[0], $command, ...[...$args, $waitArg]);
                // phpredis gives a timeout's nil array (*-1) as [], and an error as false.
                if ($reply === false && ($error = $c->getLastError()) !== null) {
                    throw new RedisErrorException("Redis error running {$command}: {$error}");
                }
                return $reply === false || $reply === null || $reply === [] ? null : $reply;
            });
            if ($reply !== null || (!$forever && hrtime(true) / 1e9 >= $deadline)) {
                return $reply;
            }
        }
    }

    /** WAIT 1 on the node of each key (once per key: keys of one node answer at once after the first). */
    public function waitForReplica(float $timeout, array $keys = []): int
    {
        $ms = (string) max(1, (int) round($timeout * 1000));
        $least = null;
        foreach (array_unique($keys) as $key) {
            $acked = $this->use('WAIT', static function (\RedisCluster $c) use ($key, $ms): int {
                $c->clearLastError();
                $acked = $c->rawCommand($key, 'WAIT', '1', $ms);
                if (!\is_int($acked)) {
                    throw new RedisErrorException('Redis error running WAIT: ' . ($c->getLastError() ?? 'unexpected reply'));
                }
                return $acked;
            });
            $least = min($least ?? $acked, $acked);
        }
        return $least ?? 1;
    }

    public function copy(): RedisLink
    {
        return new self($this->seeds, $this->username, $this->password, $this->tls, $this->timeout, $this->writeWait, $this->secrets);
    }

    public function close(): void
    {
        $this->drop();
    }

    /**
     * Runs $call on the cluster; a failed socket, a failover or a cluster
     * that is down drops both RedisClusters (the next call maps the cluster
     * again) and raises ConnectionException.
     *
     * @template T
     * @param \Closure(\RedisCluster): T $call
     * @return T
     * @throws ConnectionException|RedisErrorException
     */
    private function use(string $what, \Closure $call): mixed
    {
        $cluster = $this->cluster();
        try {
            return $call($cluster);
        } catch (RedisErrorException $e) {
            if (!self::transient($e->getMessage())) {
                throw $e;
            }
            $this->drop();
            throw new ConnectionException($this->scrub($e->getMessage()), 0, $e);
        } catch (ConnectionException $e) {
            $this->drop();
            throw $e;
        } catch (\RedisClusterException|\RedisException $e) {
            $this->drop();
            throw new ConnectionException("Redis Cluster error running {$what}: " . $this->scrub($e->getMessage()), 0, $e);
        }
    }

    /** Whether an error reply's text is one of a cluster that is changing. */
    private static function transient(string $message): bool
    {
        foreach (self::TRANSIENT as $code) {
            if (str_contains($message, ": {$code}") || str_starts_with($message, $code)) {
                return true;
            }
        }
        return false;
    }

    /** @throws ConnectionException */
    private function cluster(): \RedisCluster
    {
        return $this->cluster ??= $this->connect($this->timeout + $this->writeWait);
    }

    /** @throws ConnectionException */
    private function blocker(): \RedisCluster
    {
        return $this->blocker ??= $this->connect(self::BLOCK_SLICE + $this->timeout);
    }

    private function drop(): void
    {
        foreach ([$this->cluster, $this->blocker] as $c) {
            try {
                $c?->close();
            } catch (\RedisClusterException|\RedisException) {
                // already gone
            }
        }
        $this->cluster = $this->blocker = null;
    }

    /**
     * A RedisCluster mapped from the seeds (CLUSTER SLOTS). Its exception is
     * not chained: its trace would hold the constructor's arguments, the
     * password among them.
     *
     * @throws ConnectionException
     */
    private function connect(float $readTimeout): \RedisCluster
    {
        $auth = $this->password === null ? null : ($this->username !== null ? [$this->username, $this->password] : $this->password);
        $where = implode(',', $this->seeds);
        // A failed TLS handshake is reported as PHP warnings: their text goes into the exception instead.
        $warnings = [];
        set_error_handler(static function (int $no, string $message) use (&$warnings): bool {
            $warnings[] = trim((string) preg_replace(['/^RedisCluster::__construct\(\):\s*/', '/\s+/'], ['', ' '], $message));
            return true;
        });
        try {
            $cluster = $this->tls === null
                ? new \RedisCluster(null, $this->seeds, $this->timeout, $readTimeout, false, $auth)
                // the ssl context options themselves (Redis::connect() takes them under "stream")
                : new \RedisCluster(null, $this->seeds, $this->timeout, $readTimeout, false, $auth, $this->tls);
        } catch (\RedisClusterException|\RedisException $e) {
            restore_error_handler();
            $detail = implode('; ', array_unique([...$warnings, $e->getMessage()]));
            // RedisCluster says only that no seed answered: a refused (or
            // missing) password is told apart by asking a seed alone.
            $refused = $warnings === [] ? $this->refusal() : null;
            throw new ConnectionException("cannot connect to the Redis Cluster at {$where}: " . $this->scrub($detail)
                . ($refused === null ? '' : " ({$refused})"));
        }
        restore_error_handler();
        return $cluster;
    }

    /**
     * Why the seeds refuse us, if they do: a plain connection to each
     * (AUTH, or a PING without a password) until one says so.
     */
    private function refusal(): ?string
    {
        foreach ($this->seeds as $seed) {
            [[$host, $port]] = Sentinels::parseNodes($seed);
            $bare = str_contains($host, ':') ? "[{$host}]" : $host;
            $probe = new Connection(
                ($this->tls !== null ? 'tls://' : '') . $bare,
                $port,
                "{$bare}:{$port}",
                $this->tls === null ? null : ['stream' => $this->tls + ['peer_name' => $host]],
                $this->username,
                $this->password,
                0,
                $this->timeout,
                $this->secrets,
            );
            try {
                $probe->open();
                $probe->close();
            } catch (ConnectionException $e) {
                if (str_contains($e->getMessage(), 'authentication failed')) {
                    return $e->getMessage();
                }
            }
        }
        return null;
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
