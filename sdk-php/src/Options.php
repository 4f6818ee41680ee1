<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\InvalidArgumentException;

/**
 * The client's options, checked before anything connects, turned into the
 * link to Redis, the key names and the 1.x properties.
 *
 * @internal used by {@see Client}
 */
final class Options
{
    /** The options this SDK reads; any other key becomes a property (as in 1.x). */
    public const KEYS = [
        'url', 'host', 'port', 'database', 'username', 'password', 'tls', 'prefix', 'timeout',
        'sentinels', 'master_name', 'sentinel_username', 'sentinel_password', 'sentinel_tls', 'durable', 'layout',
        'cluster', 'cluster_tls',
    ];

    private const SENTINEL_KEYS = ['master_name', 'sentinel_username', 'sentinel_password', 'sentinel_tls'];

    /** Default connect and read timeout, in seconds. */
    public const DEFAULT_TIMEOUT = 5.0;

    /** The tls option's keys (PHP's ssl context names). */
    private const TLS_KEYS = ['cafile', 'local_cert', 'local_pk'];

    /** $host, $port, $database and $password as 1.x's properties show them. */
    private function __construct(
        public readonly string $host,
        public readonly int $port,
        public readonly int $database,
        #[\SensitiveParameter] public readonly string $password,
        public readonly Keys $keys,
        public readonly RedisLink $connection,
        public readonly ?float $durable = null,
    ) {
    }

    /**
     * @param array<string, mixed> $config
     * @param array{host: mixed, port: mixed, database: mixed, password: mixed} $defaults the client's properties (a 1.x
     *        subclass may declare other defaults)
     * @throws ConfigException on a bad value
     */
    public static function parse(#[\SensitiveParameter] array $config, #[\SensitiveParameter] array $defaults): self
    {
        $url = self::string($config, 'url', '', true);
        $username = self::string($config, 'username', '', true);
        $password = self::string($config + ['password' => $defaults['password']], 'password', '', true);
        $tls = self::tlsOptions($config['tls'] ?? []);
        $secrets = $password === '' ? [] : [$password];
        $context = null;
        $cluster = ($config['cluster'] ?? null) !== null;
        $sentinel = !$cluster && ($config['sentinels'] ?? null) !== null;
        if (!$cluster && ($config['cluster_tls'] ?? null) !== null) {
            throw new ConfigException('option cluster_tls goes with the cluster option');
        }
        $given = static fn (string $key): mixed => $config[$key] ?? null;
        if (!$cluster && !$sentinel) {
            self::refuse($given, self::SENTINEL_KEYS, static fn (string $key) => new ConfigException("option {$key} goes with the sentinels option"));
        }
        if ($cluster) {
            [$seeds, $verified] = self::cluster($config, $tls);
            $config = ['layout' => Keys::TOPIC] + $config;
            [$host, $port, $database, $shownHost] = ['', 0, 0, implode(',', $seeds)];
        } elseif ($sentinel) {
            self::refuse($given, ['url', 'host', 'port'], static fn (string $key) => new ConfigException("option {$key}: not used with sentinels (the sentinels name the master)"));
            $database = self::int($config, 'database', 0, 0, PHP_INT_MAX);
            $host = '';
            $port = 0;
            $where = $shownHost = "the master '" . self::string($config, 'master_name', '', false) . "' of the sentinels";
        } elseif ($url === '') {
            $config += ['host' => $defaults['host'], 'port' => $defaults['port'], 'database' => $defaults['database']];
            $host = self::string($config, 'host', '127.0.0.1', false);
            $port = self::int($config, 'port', 6379, 1, 65535);
            $database = self::int($config, 'database', 0, 0, PHP_INT_MAX);
            $where = str_starts_with($host, '/') ? $host : "{$host}:{$port}";
            $port = str_starts_with($host, '/') ? 0 : $port;
            $shownHost = $host;
        } else {
            $parsed = RedisUrl::checked($url, $given, static fn (string $key, string $message) => new ConfigException("option {$key}: {$message}"));
            if ($parsed->password !== null) {
                $secrets[] = $parsed->password;
            }
            $username = $username !== '' ? $username : (string) $parsed->username;
            $password = $password !== '' ? $password : (string) $parsed->password;
            $database = $parsed->database;
            if ($parsed->socket !== null) {
                $host = $where = $shownHost = $parsed->socket;
                $port = 0;
            } else {
                $bare = (string) $parsed->host;
                $shownHost = $bare;
                $host = ($parsed->tls ? 'tls://' : '') . Sentinels::bracketed($bare);
                $port = $parsed->port;
                $where = Sentinels::bracketed($bare) . ":{$parsed->port}";
                // Certificates matter only for rediss:// (as in the Rust SDK).
                $context = $parsed->tls ? ['stream' => $tls + ['verify_peer' => true, 'verify_peer_name' => true, 'peer_name' => $bare]] : null;
            }
        }
        $keys = self::keys($config);
        $timeout = self::timeout($config);
        if ($username !== '' && $password === '') {
            throw new ConfigException('option username needs a password');
        }
        $user = $username === '' ? null : $username;
        $pass = $password === '' ? null : $password;
        if ($cluster) {
            $connection = new ClusterConnection($seeds, $user, $pass, $verified, $timeout, $secrets);
        } else {
            $sentinels = $sentinel ? self::sentinels($config, $tls, $timeout) : null;
            if ($sentinels !== null && ($sentinelPassword = self::string($config, 'sentinel_password', '', true)) !== '') {
                $secrets[] = $sentinelPassword;
            }
            $connection = new Connection($host, $port, $where, $context, $user, $pass, $database, $timeout, $secrets, $sentinels);
        }
        return new self($shownHost, $port, $database, $password, $keys, $connection, self::durable($config['durable'] ?? null));
    }

    /**
     * @param array<string, mixed> $config
     * @param array<string, string> $tls
     * @return array{0: list<string>, 1: array<string, mixed>|null} the seeds, and the ssl options unless no TLS
     */
    private static function cluster(#[\SensitiveParameter] array $config, array $tls): array
    {
        self::refuse(static fn (string $key): mixed => $config[$key] ?? null, ['url', 'host', 'port', 'sentinels', ...self::SENTINEL_KEYS],
            static fn (string $key) => new ConfigException("option {$key}: not used with cluster (the cluster option names the nodes)"));
        if (self::int($config, 'database', 0, 0, PHP_INT_MAX) !== 0) {
            throw new ConfigException('option database: Redis Cluster has only database 0');
        }
        if (($config['layout'] ?? Keys::TOPIC) !== Keys::TOPIC) {
            throw new ConfigException('option layout: the cluster option needs the per-topic layout ("topic"; the classic layout keeps every job in one key)');
        }
        return [ClusterConnection::seedList(self::nodes($config, 'cluster')), self::tlsFlag($config, 'cluster_tls', $tls)];
    }

    /**
     * Throws $error(key) for the first of $keys that $get finds set.
     *
     * @param \Closure(string): mixed $get
     * @param list<string> $keys
     * @param \Closure(string): ConfigException $error
     */
    public static function refuse(\Closure $get, array $keys, \Closure $error): void
    {
        foreach ($keys as $key) {
            if ($get($key) !== null) {
                throw $error($key);
            }
        }
    }

    /** @param array<string, mixed> $config */
    private static function timeout(#[\SensitiveParameter] array $config): float
    {
        $timeout = $config['timeout'] ?? self::DEFAULT_TIMEOUT;
        if (\is_string($timeout) && is_numeric($timeout)) {
            $timeout = $timeout + 0; // 1.x users passed phpredis's options as they came
        }
        if (!(\is_int($timeout) || \is_float($timeout)) || !is_finite((float) $timeout) || $timeout <= 0) {
            throw new ConfigException('option timeout must be a positive number of seconds');
        }
        return (float) $timeout;
    }

    /** @param array<string, mixed> $config */
    private static function keys(#[\SensitiveParameter] array $config): Keys
    {
        $prefix = self::string($config, 'prefix', Keys::DEFAULT_PREFIX, true);
        $layout = $config['layout'] ?? Keys::CLASSIC;
        if (!\in_array($layout, Keys::LAYOUTS, true)) {
            throw new ConfigException('option layout must be "classic" or "topic", got '
                . (\is_string($layout) ? json_encode($layout, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE) : get_debug_type($layout)));
        }
        try {
            return new Keys($prefix, $layout);
        } catch (InvalidArgumentException $e) {
            throw new ConfigException("option prefix: {$e->getMessage()}", 0, $e);
        }
    }

    /** The durable option: seconds to wait for a replica after each push (true: 1 s); null or false: none. */
    private static function durable(mixed $durable): ?float
    {
        if ($durable === null || $durable === false) {
            return null;
        }
        if ($durable === true) {
            return 1.0;
        }
        if (!(\is_int($durable) || \is_float($durable)) || $durable <= 0 || $durable > 3600) {
            throw new ConfigException('option durable must be true or seconds in (0, 3600], got ' . var_export($durable, true));
        }
        return (float) $durable;
    }

    /**
     * @param array<string, mixed> $config
     * @param array<string, string> $tls
     */
    private static function sentinels(#[\SensitiveParameter] array $config, array $tls, float $timeout): Sentinels
    {
        $nodes = self::nodes($config, 'sentinels');
        $secure = self::tlsFlag($config, 'sentinel_tls', $tls);
        $username = self::string($config, 'sentinel_username', '', true);
        $password = self::string($config, 'sentinel_password', '', true);
        return new Sentinels($nodes, self::string($config, 'master_name', '', false), $username === '' ? null : $username,
            $password === '' ? null : $password, $secure, $timeout);
    }

    /**
     * The sentinel_tls or cluster_tls option: the ssl options, verified, when true.
     *
     * @param array<string, mixed> $config
     * @param array<string, string> $tls
     */
    private static function tlsFlag(#[\SensitiveParameter] array $config, string $key, array $tls): ?array
    {
        if (!\is_bool($config[$key] ?? false)) {
            throw new ConfigException("option {$key} must be a bool, got " . get_debug_type($config[$key]));
        }
        return ($config[$key] ?? false) ? $tls + ['verify_peer' => true, 'verify_peer_name' => true] : null;
    }

    /**
     * @param array<string, mixed> $config
     * @return list<array{0: string, 1: int}>
     */
    private static function nodes(#[\SensitiveParameter] array $config, string $key): array
    {
        try {
            return Sentinels::nodeList($config[$key]);
        } catch (\InvalidArgumentException $bad) {
            throw new ConfigException("option {$key}: " . $bad->getMessage());
        }
    }

    /** @return array<string, string> */
    private static function tlsOptions(mixed $tls): array
    {
        if (!\is_array($tls)) {
            throw new ConfigException('option tls must be an array (cafile, local_cert, local_pk), got ' . get_debug_type($tls));
        }
        foreach ($tls as $key => $file) {
            if (!\in_array($key, self::TLS_KEYS, true)) {
                throw new ConfigException(sprintf('unknown tls option %s (expected one of %s)', var_export($key, true), implode(', ', self::TLS_KEYS)));
            }
            if (!\is_string($file) || $file === '') {
                throw new ConfigException("option tls.{$key} must be a file path, got " . get_debug_type($file));
            }
            if (!is_file($file) || !is_readable($file)) {
                throw new ConfigException("option tls.{$key}: cannot read {$file}");
            }
        }
        if (isset($tls['local_cert']) !== isset($tls['local_pk'])) {
            [$set, $missing] = isset($tls['local_cert']) ? ['local_cert', 'local_pk'] : ['local_pk', 'local_cert'];
            throw new ConfigException("option tls.{$set} needs tls.{$missing} too");
        }
        /** @var array<string, string> $tls */
        return $tls;
    }

    /** @param array<string, mixed> $config */
    private static function string(#[\SensitiveParameter] array $config, string $key, string $default, bool $allowEmpty): string
    {
        $value = $config[$key] ?? $default;
        if (!\is_string($value) || (!$allowEmpty && $value === '')) {
            throw new ConfigException(sprintf('option %s must be a %sstring, got %s', $key, $allowEmpty ? '' : 'non-empty ', get_debug_type($value)));
        }
        return $value;
    }

    /** @param array<string, mixed> $config */
    private static function int(#[\SensitiveParameter] array $config, string $key, int $default, int $min, int $max): int
    {
        $value = $config[$key] ?? $default;
        if (\is_string($value) && preg_match('/^\d{1,18}$/', $value) === 1) {
            $value = (int) $value;
        }
        if (!\is_int($value) || $value < $min || $value > $max) {
            $shown = \is_scalar($value) ? var_export($value, true) : get_debug_type($value);
            throw new ConfigException(sprintf('option %s must be an integer from %d to %d, got %s', $key, $min, $max, $shown));
        }
        return $value;
    }
}
