<?php

declare(strict_types=1);

namespace Delayer;

/**
 * A Redis URL taken apart, as the Rust SDK reads it: redis://[user:password@]host[:port][/db],
 * rediss://... (TLS), or unix:///path/to/redis.sock[?db=N] (also redis+unix://).
 *
 * @internal used by {@see Client} and {@see ConfigFile}
 */
final class RedisUrl
{
    private function __construct(
        public readonly bool $tls,
        /** host name or IP (no brackets), or null for a unix socket */
        public readonly ?string $host,
        public readonly int $port,
        /** the socket path, or null for TCP */
        public readonly ?string $socket,
        public readonly int $database,
        public readonly ?string $username,
        #[\SensitiveParameter] public readonly ?string $password,
    ) {
    }

    /** @return self|null null when $url is not a redis://, rediss://, unix:// or redis+unix:// URL (or is malformed) */
    public static function parse(#[\SensitiveParameter] string $url): ?self
    {
        if (preg_match('#^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$#s', $url, $m) !== 1) {
            return null;
        }
        $scheme = strtolower($m[1]);
        if ($scheme === 'unix' || $scheme === 'redis+unix') {
            return self::unix($m[2]);
        }
        if ($scheme !== 'redis' && $scheme !== 'rediss') {
            return null;
        }
        $parts = parse_url($url);
        if ($parts === false || !isset($parts['host']) || $parts['host'] === '') {
            return null;
        }
        $path = $parts['path'] ?? '';
        $database = 0;
        if ($path !== '' && $path !== '/') {
            if (preg_match('#^/(\d{1,10})/?$#', $path, $db) !== 1) {
                return null;
            }
            $database = (int) $db[1];
        }
        $query = self::query($parts['query'] ?? '');
        if ($query === null) {
            return null;
        }
        return new self($scheme === 'rediss', trim($parts['host'], '[]'), $parts['port'] ?? 6379, null,
            $query === false ? $database : $query, self::decoded($parts['user'] ?? null), self::decoded($parts['pass'] ?? null));
    }

    /**
     * The url option and delayer.conf's [redis] url: refused beside host, port or database and when not a URL.
     *
     * @param \Closure(string): mixed $get a setting, null when not set
     * @param \Closure(string, string): \Delayer\Exception\ConfigException $error an error about a setting
     */
    public static function checked(#[\SensitiveParameter] string $url, \Closure $get, \Closure $error): self
    {
        Options::refuse($get, ['host', 'port', 'database'], static fn (string $key) => $error($key, 'set either url or host/port/database, not both'));
        return self::parse($url) ?? throw $error('url', 'not a redis://, rediss:// or unix:// URL');
    }

    /** "user:password@/path?db=N", the part after "unix://". */
    private static function unix(#[\SensitiveParameter] string $rest): ?self
    {
        [$rest, $queryString] = array_pad(explode('?', $rest, 2), 2, '');
        $user = $pass = null;
        $at = strpos($rest, '@');
        $slash = strpos($rest, '/');
        if ($at !== false && ($slash === false || $at < $slash)) {
            [$user, $pass] = array_pad(explode(':', substr($rest, 0, $at), 2), 2, null);
            $rest = substr($rest, $at + 1);
        }
        $path = rawurldecode($rest);
        $query = self::query($queryString);
        if ($path === '' || $path[0] !== '/' || $query === null) {
            return null;
        }
        return new self(false, null, 0, $path, $query === false ? 0 : $query, self::decoded($user), self::decoded($pass));
    }

    /** @return int|false|null the database of "?db=N"; false when absent, null when malformed */
    private static function query(string $query): int|false|null
    {
        if ($query === '') {
            return false;
        }
        parse_str($query, $values);
        if (!isset($values['db'])) {
            return false;
        }
        if (!\is_string($values['db']) || preg_match('/^\d{1,10}$/', $values['db']) !== 1) {
            return null;
        }
        return (int) $values['db'];
    }

    private static function decoded(#[\SensitiveParameter] ?string $value): ?string
    {
        return $value === null || $value === '' ? null : rawurldecode($value);
    }
}
