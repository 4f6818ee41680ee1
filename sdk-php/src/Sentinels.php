<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\RedisErrorException;

/**
 * Redis Sentinel: a failover moves the master, so {@see Connection} asks the
 * sentinels at every new connection (over a Connection: phpredis 5's
 * RedisSentinel can neither authenticate nor use TLS). Also the rule of
 * [redis] mode and node lists.
 *
 * @internal used by {@see Options}, {@see ConfigFile} and {@see Connection}
 */
final class Sentinels
{
    /** Keys of the sentinel mode; of one fixed address; and those cluster mode does not use. */
    private const SENTINEL_ONLY = ['nodes', 'master_name', 'sentinel_username', 'sentinel_password', 'tls'];
    private const FIXED_ONLY = ['url', 'host', 'port'];
    private const NOT_IN_CLUSTER = ['url', 'host', 'port', 'master_name', 'sentinel_username', 'sentinel_password'];

    /**
     * @param list<array{0: string, 1: int}> $nodes the sentinels, asked in this order
     * @param array<string, mixed>|null $tls TLS stream options, for the master too (null: no TLS)
     */
    public function __construct(
        public readonly array $nodes,
        public readonly string $masterName,
        private readonly ?string $username,
        #[\SensitiveParameter] private readonly ?string $password,
        public readonly ?array $tls,
        private readonly float $timeout,
    ) {
    }

    /** @return array{0: string, 1: int} the master's address as the first sentinel that knows it says */
    public function master(): array
    {
        $why = [];
        foreach ($this->nodes as [$host, $port]) {
            $node = Connection::to($host, $port, $this->tls, $this->username, $this->password, $this->timeout,
                $this->password === null ? [] : [$this->password]);
            try {
                [$reply] = $node->commands([['SENTINEL', ['get-master-addr-by-name', $this->masterName]]]);
                if (\is_array($reply) && \count($reply) === 2 && ctype_digit((string) $reply[1])) {
                    return [(string) $reply[0], (int) $reply[1]];
                }
                $why[] = "{$host}:{$port}: does not know the master";
            } catch (ConnectionException|RedisErrorException $e) {
                $why[] = "{$host}:{$port}: {$e->getMessage()}";
            } finally {
                $node->close();
            }
        }
        throw new ConnectionException("no sentinel named a master for '{$this->masterName}' (" . implode('; ', $why) . ')');
    }

    /** A host as it goes before ":port" or after "tls://": an IPv6 address in brackets. */
    public static function bracketed(string $host): string
    {
        return str_contains($host, ':') ? "[{$host}]" : $host;
    }

    /**
     * The sentinels or the cluster option: "host:port,..." or a list of "host:port" or [host, port].
     *
     * @return list<array{0: string, 1: int}>
     */
    public static function nodeList(mixed $given): array
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
                $node = self::bracketed($node[0]) . ":{$node[1]}";
            }
            if (!\is_string($node)) {
                throw new \InvalidArgumentException('each node is "host:port" or [host, port], got ' . get_debug_type($node));
            }
            try {
                array_push($nodes, ...self::parseNodes($node));
            } catch (\InvalidArgumentException $bad) {
                throw new \InvalidArgumentException(json_encode($bad->getMessage(), JSON_UNESCAPED_SLASHES) . ' is not host:port');
            }
        }
        return $nodes;
    }

    /**
     * @return list<array{0: string, 1: int}> of "host:port,..." ("[::1]:26379" for IPv6)
     * @throws \InvalidArgumentException with the first entry that is not host:port
     */
    public static function parseNodes(string $text): array
    {
        $nodes = [];
        foreach (explode(',', $text) as $entry) {
            $entry = trim($entry);
            $colon = strrpos($entry, ':');
            $host = $colon === false ? '' : substr($entry, 0, $colon);
            $port = $colon === false ? '' : substr($entry, $colon + 1);
            if (str_starts_with($host, '[') && str_ends_with($host, ']')) {
                $host = substr($host, 1, -1);
            }
            if ($host === '' || strpbrk($host, ' []') !== false || preg_match('/^\d{1,5}$/', $port) !== 1
                || (int) $port < 1 || (int) $port > 65535) {
                throw new \InvalidArgumentException($entry);
            }
            $nodes[] = [$host, (int) $port];
        }
        return $nodes;
    }

    /**
     * The server's rule for [redis] mode and its keys (sdk-rust/src/sentinel.rs and cluster.rs), its messages in its order.
     *
     * @param \Closure(string): ?string $get a [redis] value, null when absent or empty
     * @param \Closure(string, string): ConfigException $error an error about a [redis] key
     * @return array<string, mixed> the constructor options of the mode
     */
    public static function readConfig(\Closure $get, \Closure $error, string $layout = Keys::CLASSIC): array
    {
        $mode = $get('mode');
        if ($mode === null || $mode === 'standalone') {
            Options::refuse($get, self::SENTINEL_ONLY, static fn (string $key) => $error($key, 'is only used with mode = '
                . (\in_array($key, ['nodes', 'tls'], true) ? 'sentinel or cluster' : 'sentinel') . ' (mode is standalone)'));
            return [];
        }
        if ($mode !== 'sentinel' && $mode !== 'cluster') {
            throw $error('mode', self::quoted($mode) . ' is not a mode: standalone, sentinel or cluster');
        }
        $cluster = $mode === 'cluster';
        [$named, $what] = $cluster ? ['the nodes name the cluster', 'seed nodes'] : ['the sentinels name the master (nodes)', 'the sentinels'];
        Options::refuse($get, $cluster ? self::NOT_IN_CLUSTER : self::FIXED_ONLY, static fn (string $key) => $error($key, "not used with mode = {$mode}: {$named}"));
        $database = $get('database');
        if ($cluster && $database !== null && $database !== '0') {
            throw $error('database', 'Redis Cluster has only database 0');
        }
        $nodes = $get('nodes') ?? throw $error('mode', "mode = {$mode} needs nodes ({$what}: host:port,host:port,...)");
        $name = $cluster ? null : ($get('master_name') ?? throw $error('mode', 'mode = sentinel needs master_name'));
        $tls = $get('tls');
        if (!\in_array($tls, [null, 'yes', 'no', 'true', 'false'], true)) {
            throw $error('tls', self::quoted((string) $tls) . ' is not yes or no');
        }
        try {
            $parsed = self::parseNodes($nodes);
        } catch (\InvalidArgumentException $bad) {
            throw $error('nodes', self::quoted($bad->getMessage()) . ' is not host:port');
        }
        $tls = \in_array($tls, ['yes', 'true'], true);
        if ($cluster && $layout !== Keys::TOPIC) {
            throw $error('mode', 'mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)');
        }
        if ($cluster) {
            return ['cluster' => ClusterConnection::seedList($parsed), 'cluster_tls' => $tls];
        }
        return array_filter(['sentinels' => $parsed, 'master_name' => $name, 'sentinel_tls' => $tls,
            'sentinel_username' => $get('sentinel_username'), 'sentinel_password' => $get('sentinel_password')],
            static fn (mixed $value): bool => $value !== null);
    }

    /** $text in double quotes, as Rust's {:?} shows a plain string. */
    public static function quoted(string $text): string
    {
        return '"' . str_replace(['\\', '"'], ['\\\\', '\\"'], $text) . '"';
    }
}
