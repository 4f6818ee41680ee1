<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;

/**
 * Reads the client's settings from the server's delayer.conf.
 *
 * Used keys: [redis] url, host, port, database, username, password,
 * tls_ca_file, tls_cert_file, tls_key_file, the mode keys (mode, nodes, tls,
 * master_name, sentinel_*: {@see Sentinels}, {@see ClusterConnection}) and
 * [delayer] key_prefix, layout (relative
 * certificate paths are relative to the file's directory). The server's
 * other keys are accepted and not used, so one file serves the server and
 * its clients; a key or section the server does not know is an error, as it
 * is for the server (a typo such as "prot = 6380" would otherwise connect to
 * the default port), with the server's message: "<file>:<line>: [redis]
 * prot: unknown key (did you mean port?); [redis] takes url, host, ...".
 * What a Delayer 1.x release wrote and this version does not use
 * (IGNORED_1X: the early [delayerd] section, [redis] timeout) is accepted
 * silently. Comments start with ";" or "#", on
 * their own line or after a value preceded by whitespace
 * ("port = 6380 ; test instance"); a value may be double-quoted to keep
 * " ;" or " #" in it ("password = \"a ;b\""). Errors name the file, line,
 * section and key ("/etc/delayer.conf:12: [redis] port: ...").
 *
 * The DELAYER_* environment variables override the file, as for the server
 * (sdk-rust/src/conf/env.rs, one rule; conformance/env_cases.json holds the
 * readers together): [delayer] keys are DELAYER_<KEY>, [redis] keys
 * DELAYER_REDIS_<KEY>; with _FILE appended the value is read from the file
 * named (trailing newlines dropped); setting both is an error. A URL from
 * the environment replaces the file's host/port/database, and any of those
 * the file's URL. An error
 * about such a value names the variable ("DELAYER_REDIS_PORT: [redis] port: ...").
 *
 * @internal used by {@see Client::fromConfig()}
 */
final class ConfigFile
{
    /**
     * Every key the server reads, per section (server/src/config.rs,
     * KNOWN_KEYS, in its order: the error lists them so).
     */
    public const KNOWN_KEYS = [
        'delayer' => [
            'pid', 'timer_interval', 'access_log', 'error_log', 'batch_size', 'key_prefix', 'layout', 'log_level', 'log_format', 'metrics_addr',
            'http_addr', 'http_token', 'http_read_token', 'http_allow_remote',
            'http_allowed_hosts', 'http_trusted_proxies', 'http_session_secret', 'http_session_lifetime',
            'http_max_connections', 'http_header_timeout', 'http_body_timeout', 'http_redis_timeout', 'http_max_waiting',
            'metrics_allow_remote',
        ],
        'redis' => [
            'url', 'host', 'port', 'database', 'username', 'password', 'tls_ca_file', 'tls_cert_file', 'tls_key_file',
            'max_idle', 'max_active', 'idle_timeout', 'conn_max_lifetime',
            'mode', 'nodes', 'master_name', 'sentinel_username', 'sentinel_password', 'tls', 'require_noeviction',
        ],
    ];

    /**
     * The keys of a [webhook.<topic>] section, read by `delayer webhook` only;
     * accepted by every reader (sdk-rust/src/conf.rs, WEBHOOK_KEYS).
     */
    public const WEBHOOK_KEYS = ['url', 'secret', 'secret_file', 'timeout', 'concurrency', 'ttr'];

    /**
     * Delayer 1.x sections and keys this version does not use, accepted so a
     * 1.x file works unchanged: section => null (every key) or its keys
     * (sdk-rust/src/conf.rs, IGNORED_1X; the server logs them).
     */
    public const IGNORED_1X = [
        'delayerd' => null,
        'redis' => ['timeout'],
    ];

    /** Largest value a DELAYER_*_FILE variable's file may hold (sdk-rust/src/conf/env.rs). */
    public const MAX_ENV_FILE_BYTES = 65536;

    /**
     * Where a section array keeps the values set from the environment (a
     * key no INI file can hold), so they are taken as given, untrimmed.
     */
    private const ENV = "\0env";

    private function __construct()
    {
    }

    /** The variable that sets $key of [$section]: DELAYER_HTTP_ADDR, DELAYER_REDIS_PASSWORD. */
    public static function envVar(string $section, string $key): string
    {
        return $section === 'delayer' ? 'DELAYER_' . strtoupper($key) : 'DELAYER_' . strtoupper($section) . '_' . strtoupper($key);
    }

    /**
     * Lays the DELAYER_* variables of $environ over the sections (the rule of
     * sdk-rust/src/conf/env.rs); marks in $lines the variable each key came
     * from, so that an error about it names the variable.
     *
     * @param array<string, array<string, mixed>> $ini
     * @param array<string, int|string> $lines
     * @param array<string, string> $environ
     * @throws ConfigException
     */
    private static function overlay(array &$ini, array &$lines, array $environ): void
    {
        foreach (self::KNOWN_KEYS as $section => $keys) {
            foreach ($keys as $key) {
                $var = self::envVar($section, $key);
                $fileVar = $var . '_FILE';
                $where = "{$fileVar}: [{$section}] {$key}: ";
                if (isset($environ[$var]) && isset($environ[$fileVar])) {
                    throw new ConfigException("{$where}{$var} is set too; set one of them, not both");
                }
                if (isset($environ[$var])) {
                    [$value, $from] = [$environ[$var], $var];
                } elseif (isset($environ[$fileVar])) {
                    [$value, $from] = [self::readValue($environ[$fileVar], $where), $fileVar];
                } else {
                    continue;
                }
                $ini[$section][self::ENV][$key] = $value;
                $lines["{$section} {$key}"] = $from;
            }
        }
        // The address's two forms: the environment's replaces the file's other one.
        foreach ([[['url'], ['host', 'port', 'database']], [['host', 'port', 'database'], ['url']]] as [$given, $other]) {
            $fromEnv = array_filter($given, static fn (string $k): bool => isset($ini['redis'][self::ENV][$k]));
            if ($fromEnv === []) {
                continue;
            }
            foreach ($other as $k) {
                if (!isset($ini['redis'][self::ENV][$k])) {
                    unset($ini['redis'][$k]);
                }
            }
        }
    }

    /**
     * What the file at $path holds, trailing newlines dropped; the error
     * names the path, never the contents.
     *
     * @throws ConfigException
     */
    private static function readValue(string $path, string $where): string
    {
        if ($path === '') {
            throw new ConfigException("{$where}is empty: it names the file to read the value from");
        }
        $data = is_file($path) && is_readable($path) ? @file_get_contents($path, false, null, 0, self::MAX_ENV_FILE_BYTES + 1) : false;
        if ($data === false) {
            throw new ConfigException("{$where}cannot read {$path}: "
                . (file_exists($path) ? 'not a readable file' : 'No such file or directory'));
        }
        if (\strlen($data) > self::MAX_ENV_FILE_BYTES) {
            throw new ConfigException("{$where}{$path} is larger than " . self::MAX_ENV_FILE_BYTES . ' bytes');
        }
        if (!mb_check_encoding($data, 'UTF-8')) {
            throw new ConfigException("{$where}{$path} is not UTF-8 text");
        }
        return rtrim($data, "\r\n");
    }

    /**
     * @return array{url?: string, host?: string, port?: int, database?: int, username?: string, password?: string, tls?: array{cafile?: string, local_cert?: string, local_pk?: string}, prefix?: string, sentinels?: list<array{0: string, 1: int}>, master_name?: string, sentinel_tls?: bool, sentinel_username?: string, sentinel_password?: string, cluster?: list<string>, cluster_tls?: bool, layout?: 'topic'}
     *         options for {@see Client::__construct()}; keys absent from the
     *         file are absent here (the client's defaults apply)
     * @param array<string, string>|null $environ the DELAYER_* variables
     *        over the file (null: the process's, getenv())
     * @throws ConfigException naming the file (or variable), and the section and key of a bad value
     */
    public static function load(string $path, ?array $environ = null): array
    {
        if (!is_file($path) || !is_readable($path)) {
            throw new ConfigException("{$path}: cannot read the Delayer config file");
        }
        $text = @file_get_contents($path);
        if ($text === false) {
            throw new ConfigException("{$path}: cannot read the Delayer config file");
        }
        error_clear_last();
        [$normalized, $lines, $entries, $sections] = self::normalize($text);
        self::rejectUnknown($path, $entries, $sections);
        $ini = @parse_ini_string($normalized, true, INI_SCANNER_RAW);
        if ($ini === false) {
            $why = error_get_last()['message'] ?? 'syntax error';
            throw new ConfigException("{$path}: cannot parse the Delayer config file: {$why}");
        }
        $ini['redis'] = self::section($path, $ini, 'redis');
        $ini['delayer'] = self::section($path, $ini, 'delayer');
        self::overlay($ini, $lines, $environ ?? getenv());
        $redis = $ini['redis'];
        $delayer = $ini['delayer'];
        $get = static function (array $section, string $key): ?string {
            $value = self::value($section, $key);
            return $value === null || $value === '' ? null : $value;
        };
        $base = \dirname(realpath($path) ?: $path);
        $readable = static function (string $key) use ($get, $redis, $path, $lines, $base): ?string {
            $file = $get($redis, $key);
            if ($file === null) {
                return null;
            }
            // relative to the file's directory, or to the working directory when from the environment
            $dir = \is_string($lines["redis {$key}"] ?? null) ? (getcwd() ?: '.') : $base;
            $full = str_starts_with($file, '/') ? $file : $dir . '/' . $file;
            if (!is_file($full) || !is_readable($full)) {
                throw self::error($path, $lines, 'redis', $key, "cannot read {$file}: "
                    . (file_exists($full) ? 'not a readable file' : 'No such file or directory'));
            }
            return $full;
        };

        // The layout first, as the Rust reader does: a client that cannot use
        // the keys the server moves must not start.
        $layout = $get($delayer, 'layout') ?? Keys::CLASSIC;
        if (!\in_array($layout, Keys::LAYOUTS, true)) {
            throw self::error($path, $lines, 'delayer', 'layout', sprintf('"%s" is not one of classic, topic', $layout));
        }
        $prefix = $get($delayer, 'key_prefix');
        if ($layout === Keys::TOPIC && $prefix !== null && strpbrk($prefix, '{}') !== false) {
            // as the Rust reader words it (sdk-rust/src/conf/mod.rs, layout)
            throw self::error($path, $lines, 'delayer', 'key_prefix', sprintf(
                'key_prefix %s contains a brace, which the per-topic layout cannot use',
                json_encode($prefix, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE)
            ));
        }

        // Checked in the Rust SDK's order (sdk-rust/src/conf.rs), so that a
        // file with several mistakes gets the same first error in every SDK.
        // mode = sentinel: the options of Sentinels (sentinels, master_name, ...);
        // mode = cluster: those of ClusterConnection (cluster, cluster_tls).
        $config = Sentinels::readConfig(
            static fn (string $key): ?string => $get($redis, $key),
            static fn (string $key, string $message): ConfigException => self::error($path, $lines, 'redis', $key, $message),
            $layout,
        );
        $url = $get($redis, 'url');
        if ($url !== null) {
            foreach (['host', 'port', 'database'] as $key) {
                if ($get($redis, $key) !== null) {
                    throw self::error($path, $lines, 'redis', $key, 'set either url or host/port/database, not both');
                }
            }
            if (RedisUrl::parse($url) === null) {
                throw self::error($path, $lines, 'redis', 'url', 'not a redis://, rediss:// or unix:// URL');
            }
            $config['url'] = $url;
        }
        if (($database = $get($redis, 'database')) !== null) {
            $database = self::integer($path, $lines, 'redis', 'database', $database, 0, 2147483647);
        }
        $cert = $readable('tls_cert_file');
        $key = $readable('tls_key_file');
        if ($cert !== null && $key === null) {
            throw self::error($path, $lines, 'redis', 'tls_cert_file', 'needs tls_key_file too');
        }
        if ($key !== null && $cert === null) {
            throw self::error($path, $lines, 'redis', 'tls_key_file', 'needs tls_cert_file too');
        }
        if (($host = $get($redis, 'host')) !== null) {
            $config['host'] = $host;
        }
        if (($port = $get($redis, 'port')) !== null) {
            $config['port'] = self::integer($path, $lines, 'redis', 'port', $port, 1, 65535);
        }
        if ($database !== null) {
            $config['database'] = $database;
        }
        if (($username = $get($redis, 'username')) !== null) {
            $config['username'] = $username;
        }
        if (($password = $get($redis, 'password')) !== null) {
            $config['password'] = $password;
        }
        $tls = [];
        if (($ca = $readable('tls_ca_file')) !== null) {
            $tls['cafile'] = $ca;
        }
        if ($cert !== null && $key !== null) {
            $tls['local_cert'] = $cert;
            $tls['local_pk'] = $key;
        }
        if ($tls !== []) {
            $config['tls'] = $tls;
        }
        if ($prefix !== null) {
            $config['prefix'] = $prefix;
        }
        if ($layout !== Keys::CLASSIC) {
            $config['layout'] = $layout;
        }
        return $config;
    }

    /**
     * Rewrites the file so that PHP's raw INI scanner reads each value as the
     * server does: whole-line comments start with ";" or "#"; an inline
     * comment starts at ";" or "#" preceded by whitespace (or right after
     * the "="); a value may be quoted with " or ' (quotes removed, ";" and
     * "#" inside kept). The value is
     * then written back quoted, so that PHP keeps a bare ";" (as in
     * "pa;ss") instead of cutting the value there. Line numbers are kept.
     *
     * Keys are split from values at the first "=" or ":", as the server's
     * INI reader does.
     *
     * @return array{0: string, 1: array<string, int>, 2: list<array{0: ?string, 1: string, 2: int}>, 3: array<string, int>}
     *         the text for parse_ini_string(), the 1-based line of each
     *         "section key", every entry in file order (section, null before
     *         the first header; key; line), and the first line of each section
     */
    private static function normalize(string $text): array
    {
        if (str_starts_with($text, "\u{FEFF}")) {
            $text = substr($text, 3);
        }
        $out = [];
        $lines = [];
        $entries = [];
        $sections = [];
        $section = null;
        foreach (preg_split('/\r\n|\n|\r/', $text) ?: [] as $n => $line) {
            $trimmed = trim($line);
            if ($trimmed === '' || $trimmed[0] === ';' || $trimmed[0] === '#') {
                $out[] = '';
                continue;
            }
            if ($trimmed[0] === '[') {
                $header = self::stripComment($trimmed);
                $section = trim(substr($header, 1, (int) strrpos($header, ']') - 1));
                $sections[$section] ??= $n + 1;
                $out[] = $header;
                continue;
            }
            $eq = strcspn($line, '=:');
            if ($eq === \strlen($line)) {
                $out[] = $line; // let PHP judge it
                continue;
            }
            $key = trim(substr($line, 0, $eq));
            $lines["{$section} {$key}"] = $n + 1;
            $entries[] = [$section, $key, $n + 1];
            $value = trim(substr($line, $eq + 1));
            $quote = $value[0] ?? '';
            $close = \strlen($value) > 1 && ($quote === '"' || $quote === "'") ? strpos($value, $quote, 1) : false;
            if ($close !== false && preg_match('/^(\s*$|\s+[;#])/', substr($value, $close + 1)) === 1) {
                $value = substr($value, 1, $close - 1);
            } else {
                $value = self::stripComment(' ' . $value); // "key = ; c" is empty
            }
            // In raw mode a quoted value is taken as is, except that it cannot
            // hold a double quote or end in a backslash: leave those bare.
            $out[] = str_contains($value, '"') || str_ends_with($value, '\\')
                ? "{$key} = {$value}"
                : "{$key} = \"{$value}\"";
        }
        return [implode("\n", $out), $lines, $entries, $sections];
    }

    /**
     * The server's rule (sdk-rust/src/conf.rs, reject_unknown): every key is
     * in [delayer] or [redis] and is one the server knows, or is a Delayer
     * 1.x key this version ignores. The first offender in file order is
     * reported, worded as the server words it, with the closest known name. A
     * section without keys is not looked at (the server's reader does not
     * see it either).
     *
     * @param list<array{0: ?string, 1: string, 2: int}> $entries
     * @param array<string, int> $sections
     * @throws ConfigException
     */
    private static function rejectUnknown(string $path, array $entries, array $sections): void
    {
        foreach ($entries as [$section, $key, $line]) {
            if ($section === null) {
                throw new ConfigException("{$path}:{$line}: {$key}: keys must be inside a [delayer] or [redis] section");
            }
            if (\array_key_exists($section, self::IGNORED_1X)
                && (self::IGNORED_1X[$section] === null || \in_array($key, self::IGNORED_1X[$section], true))) {
                continue;
            }
            $known = self::KNOWN_KEYS[$section] ?? null;
            if ($known === null && str_starts_with($section, 'webhook.') && $section !== 'webhook.') {
                $known = self::WEBHOOK_KEYS;
            }
            if ($known === null) {
                $near = self::closest($section, array_keys(self::KNOWN_KEYS));
                $hint = $near === null ? '' : " (did you mean [{$near}]?)";
                throw new ConfigException("{$path}:{$sections[$section]}: [{$section}]: unknown section{$hint}; known sections are [delayer] and [redis]");
            }
            if (!\in_array($key, $known, true)) {
                $near = self::closest($key, $known);
                $hint = $near === null ? '' : " (did you mean {$near}?)";
                throw new ConfigException("{$path}:{$line}: [{$section}] {$key}: unknown key{$hint}; [{$section}] takes " . implode(', ', $known));
            }
        }
    }

    /**
     * The candidate nearest to $name by edit distance (Levenshtein, on
     * bytes) if it is a likely typo: at most 2 edits, or a third of the
     * name's length; ties go to the first (sdk-rust/src/conf.rs, closest).
     *
     * @param list<string> $candidates
     */
    private static function closest(string $name, array $candidates): ?string
    {
        $limit = max(2, intdiv(\strlen($name), 3));
        $best = null;
        $bestDistance = PHP_INT_MAX;
        foreach ($candidates as $candidate) {
            $distance = levenshtein($name, $candidate);
            if ($distance <= $limit && $distance < $bestDistance) {
                [$best, $bestDistance] = [$candidate, $distance];
            }
        }
        return $best;
    }

    /** Cuts an inline comment: ";" or "#" preceded by whitespace. */
    private static function stripComment(string $value): string
    {
        return trim((string) preg_replace('/\s[;#].*$/s', '', $value));
    }

    /**
     * @param array<string, mixed> $ini
     * @return array<string, mixed>
     */
    private static function section(string $path, array $ini, string $name): array
    {
        $section = $ini[$name] ?? [];
        if (!\is_array($section)) {
            throw new ConfigException("{$path}: [{$name}] must be a section, found a key named {$name}");
        }
        return $section;
    }

    /**
     * A value, trimmed (comments and quotes were handled by normalize()).
     *
     * @param array<string, mixed> $section
     */
    private static function value(array $section, string $key): ?string
    {
        if (isset($section[self::ENV][$key])) {
            return $section[self::ENV][$key]; // from the environment: as given
        }
        if (!\array_key_exists($key, $section)) {
            return null;
        }
        $value = $section[$key];
        if (\is_array($value)) {
            return null; // "key[] = ..." is nothing we read
        }
        return trim((string) $value, " \t\r\n");
    }

    /**
     * @param array<string, int|string> $lines
     * @throws ConfigException
     */
    private static function integer(string $path, array $lines, string $section, string $key, string $value, int $min, int $max): int
    {
        if (preg_match('/^\d{1,10}$/', $value) !== 1 || (int) $value < $min || (int) $value > $max) {
            throw self::error($path, $lines, $section, $key, sprintf(
                'must be an integer from %d to %d, got %s',
                $min,
                $max,
                json_encode($value, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)
            ));
        }
        return (int) $value;
    }

    /**
     * An error about $key in [$section], as "file:line: [section] key: message",
     * or "VARIABLE: [section] key: message" when the environment set it.
     *
     * @param array<string, int|string> $lines
     */
    private static function error(string $path, array $lines, string $section, string $key, string $message): ConfigException
    {
        $from = $lines["{$section} {$key}"] ?? null;
        if (\is_string($from)) {
            return new ConfigException("{$from}: [{$section}] {$key}: {$message}");
        }
        $line = isset($lines["{$section} {$key}"]) ? ':' . $lines["{$section} {$key}"] : '';
        return new ConfigException("{$path}{$line}: [{$section}] {$key}: {$message}");
    }
}
