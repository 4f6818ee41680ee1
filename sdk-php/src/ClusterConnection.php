<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;

/**
 * Redis Cluster (per-topic layout only): the slot map and one {@see Connection}
 * per master, each command sent to the master of its first key's slot. MOVED
 * re-reads the map and sends again, ASK sends once after ASKING (neither ran
 * the command); a failed node or a changing cluster raise ConnectionException
 * and the next call reads the map again.
 *
 * Not phpredis's RedisCluster: 5.3.7 crashes (SIGSEGV, phpredis PR #2723)
 * after a failover, has no pipelines and fixes the read timeout at connect.
 *
 * @internal used by {@see Client}, {@see Options} and {@see Sentinels}
 */
final class ClusterConnection implements RedisLink
{
    private const MAX_REDIRECTS = 5;

    /** Error replies meaning "the cluster is changing": transient, like a lost socket. */
    private const TRANSIENT = ['CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN', 'LOADING'];

    /** @var list<array{0: int, 1: int, 2: string}>|null slot ranges and their master ("host:port"); null: to be read */
    private ?array $slots = null;

    /** @var array<string, Connection> "host:port" => the connection to that node */
    private array $nodes = [];

    private ?\RedisCluster $driver = null;

    /** @var list<int>|null CRC16 (XMODEM) table of the slot hash */
    private static ?array $crc = null;

    /**
     * @param list<string> $seeds "host:port"
     * @param array<string, mixed>|null $tls ssl stream context options; null: no TLS
     * @param list<string> $secrets passwords to keep out of messages
     */
    public function __construct(
        public readonly array $seeds,
        private readonly ?string $username,
        #[\SensitiveParameter] private readonly ?string $password,
        private readonly ?array $tls,
        private readonly float $timeout,
        #[\SensitiveParameter] private readonly array $secrets,
    ) {
    }

    /**
     * @param list<array{0: string, 1: int}> $nodes
     * @return list<string> "host:port"
     */
    public static function seedList(array $nodes): array
    {
        return array_map(static fn (array $n): string => Sentinels::bracketed($n[0]) . ":{$n[1]}", $nodes);
    }

    public function open(): void
    {
        $this->slots();
    }

    /** A RedisCluster, for 1.x subclasses; its exception is not chained (its trace holds the password). */
    public function driver(): \Redis|\RedisCluster
    {
        if ($this->driver === null) {
            $auth = $this->password === null ? null : ($this->username !== null ? [$this->username, $this->password] : $this->password);
            try {
                // RedisCluster takes the ssl options themselves (Redis::connect() under "stream")
                $this->driver = $this->tls === null
                    ? @new \RedisCluster(null, $this->seeds, $this->timeout, $this->timeout, false, $auth)
                    : @new \RedisCluster(null, $this->seeds, $this->timeout, $this->timeout, false, $auth, $this->tls);
            } catch (\RedisClusterException|\RedisException $e) {
                throw new ConnectionException('cannot connect to the Redis Cluster at ' . implode(',', $this->seeds) . ': ' . Connection::scrubbed($this->secrets, $e->getMessage()));
            }
        }
        return $this->driver;
    }

    public function script(string $name, array $keys, array $argv): mixed
    {
        if ($keys === []) {
            throw new \LogicException("{$name}.lua has no key to route it by on a cluster");
        }
        return $this->call($keys[0], static fn (Connection $node): mixed => $node->script($name, $keys, $argv));
    }

    /** One call after the other: a call sent again after a MOVED must be only that one (ifAbsent would find its own id). */
    public function pipelined(string $name, array $calls): array
    {
        $replies = [];
        foreach ($calls as [$keys, $argv]) {
            $replies[] = $this->script($name, $keys, $argv);
        }
        return $replies;
    }

    /** Pipelined per node; a node's commands that met MOVED or ASK go again one by one (they are reads). */
    public function commands(array $commands): array
    {
        $byNode = [];
        foreach ($commands as $i => [, $args]) {
            $byNode[$this->route($args[0])][$i] = $commands[$i];
        }
        $replies = [];
        foreach ($byNode as $addr => $group) {
            try {
                $replies += array_combine(array_keys($group), $this->guard(fn (): array => $this->node($addr)->commands(array_values($group))));
            } catch (RedisErrorException|ConnectionException $e) {
                if (self::redirect($e->getMessage()) === null) {
                    throw $e;
                }
                $this->slots = null;
                foreach ($group as $i => $command) {
                    [$replies[$i]] = $this->call($command[1][0], static fn (Connection $node): array => $node->commands([$command]));
                }
            }
        }
        ksort($replies);
        return array_values($replies);
    }

    public function blocking(string $command, array $args, float $wait): mixed
    {
        return $this->call($args[0], static fn (Connection $node): mixed => $node->blocking($command, $args, $wait));
    }

    /** WAIT 1 on the node of each key written; the least of their answers. */
    public function waitForReplica(float $timeout, array $keys = []): int
    {
        $least = null;
        foreach (array_unique(array_map(fn (string $key): string => $this->route($key), $keys)) as $addr) {
            $acked = $this->guard(fn (): int => $this->node($addr)->waitForReplica($timeout));
            $least = min($least ?? $acked, $acked);
        }
        return $least ?? 1;
    }

    public function copy(): RedisLink
    {
        return new self($this->seeds, $this->username, $this->password, $this->tls, $this->timeout, $this->secrets);
    }

    public function close(): void
    {
        foreach ($this->nodes as $node) {
            $node->close();
        }
        $this->nodes = [];
        $this->slots = null;
        if ($this->driver !== null) {
            Connection::closeQuietly($this->driver);
        }
        $this->driver = null;
    }

    /**
     * Runs $call on the master of $key's slot, following MOVED and ASK.
     *
     * @template T
     * @param \Closure(Connection): T $call
     * @return T
     */
    private function call(string $key, \Closure $call): mixed
    {
        $asking = null;
        for ($redirects = 0; ; $redirects++) {
            try {
                return $this->guard(function () use ($key, $call, &$asking): mixed {
                    if ($asking !== null) {
                        $node = $this->node($asking);
                        $asking = null;
                        $node->commands([['ASKING', []]]);
                        return $call($node);
                    }
                    return $call($this->node($this->route($key)));
                });
            } catch (RedisErrorException|ConnectionException $e) {
                $redirect = self::redirect($e->getMessage());
                if ($redirect === null) {
                    throw $e;
                }
                if ($redirects >= self::MAX_REDIRECTS) {
                    throw new ConnectionException("Redis Cluster: still redirected after {$redirects} redirections ({$redirect[1]})", 0, $e);
                }
                if ($redirect[0] === 'ASK') {
                    $asking = $redirect[1];
                } else {
                    $this->slots = null; // MOVED (or READONLY): the map is out of date
                }
            }
        }
    }

    /**
     * Runs $call; a lost node or a changing cluster makes the next call read the map again.
     *
     * @template T
     * @param \Closure(): T $call
     * @return T
     */
    private function guard(\Closure $call): mixed
    {
        try {
            return $call();
        } catch (ConnectionException $e) {
            $this->slots = null;
            throw $e;
        } catch (RedisErrorException $e) {
            foreach (self::TRANSIENT as $code) {
                if (str_contains($e->getMessage(), ": {$code}")) {
                    $this->slots = null;
                    throw new ConnectionException($e->getMessage(), 0, $e);
                }
            }
            throw $e;
        }
    }

    /** @return array{0: string, 1: string}|null ["MOVED"|"ASK", "host:port"]; a demoted master's READONLY counts as MOVED */
    private static function redirect(string $message): ?array
    {
        if (preg_match('/: (MOVED|ASK) \d+ (\S+)$/', $message, $m) === 1) {
            return [$m[1], $m[2]];
        }
        return str_contains($message, ': READONLY') ? ['MOVED', '?'] : null;
    }

    /** The address of the master serving $key's slot. */
    private function route(string $key): string
    {
        $slot = self::slot($key);
        foreach ($this->slots() as [$from, $to, $addr]) {
            if ($slot >= $from && $slot <= $to) {
                return $addr;
            }
        }
        $this->slots = null;
        throw new ConnectionException("Redis Cluster: no master serves slot {$slot} (a failover is under way?)");
    }

    /** @return list<array{0: int, 1: int, 2: string}> CLUSTER SLOTS of the first seed (then known master) that answers */
    private function slots(): array
    {
        if ($this->slots !== null) {
            return $this->slots;
        }
        $why = [];
        foreach (array_unique([...$this->seeds, ...array_keys($this->nodes)]) as $addr) {
            try {
                [$reply] = $this->node($addr)->commands([['CLUSTER', ['SLOTS']]]);
            } catch (ConnectionException|RedisErrorException $e) {
                $why[] = $e->getMessage();
                continue;
            }
            $slots = [];
            foreach (\is_array($reply) ? $reply : [] as $range) {
                if (!\is_array($range) || !\is_int($range[0] ?? null) || !\is_int($range[1] ?? null) || !\is_array($range[2] ?? null)) {
                    continue;
                }
                [$host, $port] = $range[2];
                $host = \is_string($host) && $host !== '' && $host !== '?' ? $host : Sentinels::parseNodes($addr)[0][0];
                $slots[] = [$range[0], $range[1], Sentinels::bracketed($host) . ':' . (int) $port];
            }
            if ($slots === []) {
                $why[] = "{$addr}: CLUSTER SLOTS named no master (is it a cluster node?)";
                continue;
            }
            return $this->slots = $slots;
        }
        throw new ConnectionException('cannot connect to the Redis Cluster at ' . implode(',', $this->seeds) . ': ' . implode('; ', array_unique($why)));
    }

    /** The connection to "host:port", made on first use. */
    private function node(string $addr): Connection
    {
        if (!isset($this->nodes[$addr])) {
            [[$host, $port]] = Sentinels::parseNodes($addr);
            $this->nodes[$addr] = Connection::to($host, $port, $this->tls, $this->username, $this->password, $this->timeout, $this->secrets);
        }
        return $this->nodes[$addr];
    }

    /** The hash slot of $key: CRC16 (XMODEM) of its hash tag (or of the key) mod 16384. */
    public static function slot(string $key): int
    {
        $open = strpos($key, '{');
        $close = $open === false ? false : strpos($key, '}', $open + 1);
        if ($close !== false && $close > $open + 1) {
            $key = substr($key, $open + 1, $close - $open - 1);
        }
        if (self::$crc === null) { // built once: a table lookup per byte is 4x faster than 8 shifts
            self::$crc = [];
            for ($i = 0; $i < 256; $i++) {
                $c = $i << 8;
                for ($j = 0; $j < 8; $j++) {
                    $c = ($c & 0x8000) !== 0 ? (($c << 1) ^ 0x1021) & 0xFFFF : ($c << 1) & 0xFFFF;
                }
                self::$crc[] = $c;
            }
        }
        $crc = 0;
        for ($i = 0, $length = \strlen($key); $i < $length; $i++) {
            $crc = (($crc << 8) & 0xFFFF) ^ self::$crc[(($crc >> 8) ^ \ord($key[$i])) & 0xFF];
        }
        return $crc & 16383;
    }
}
