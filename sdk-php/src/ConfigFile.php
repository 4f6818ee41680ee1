<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;

/**
 * The client's settings from the server's delayer.conf, DELAYER_* variables
 * over it, by the server's rules and messages (sdk-rust/src/conf): one file
 * serves the server and its clients, and a typo ("prot = 6380") is an error.
 *
 * @internal used by {@see Client::fromConfig()}
 */
final class ConfigFile
{
    /** Every key the server reads, per section, in its order (the error lists them so). */
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

    /** The keys of a [webhook.<topic>] section (read by `delayer webhook` only). */
    public const WEBHOOK_KEYS = ['url', 'secret', 'secret_file', 'timeout', 'concurrency', 'ttr'];

    /** Delayer 1.x sections (null: every key) and keys this version ignores. */
    public const IGNORED_1X = ['delayerd' => null, 'redis' => ['timeout']];

    /** Largest value a DELAYER_*_FILE variable's file may hold. */
    public const MAX_ENV_FILE_BYTES = 65536;

    /** A section's values from the environment (no INI key can be this), taken untrimmed. */
    private const ENV = "\0env";

    /** The variable that sets $key of [$section]: DELAYER_HTTP_ADDR, DELAYER_REDIS_PASSWORD. */
    public static function envVar(string $section, string $key): string
    {
        return $section === 'delayer' ? 'DELAYER_' . strtoupper($key) : 'DELAYER_' . strtoupper($section) . '_' . strtoupper($key);
    }

    /**
     * Lays the DELAYER_* variables (or their _FILE forms) over the sections; $lines gets the variable of each key.
     *
     * @param array<string, array<string, mixed>> $ini
     * @param array<string, int|string> $lines
     * @param array<string, string> $environ
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
            if (array_filter($given, static fn (string $k): bool => isset($ini['redis'][self::ENV][$k])) === []) {
                continue;
            }
            foreach ($other as $k) {
                if (!isset($ini['redis'][self::ENV][$k])) {
                    unset($ini['redis'][$k]);
                }
            }
        }
    }

    /** What the file at $path holds, trailing newlines dropped; errors name the path, never the contents. */
    private static function readValue(string $path, string $where): string
    {
        if ($path === '') {
            throw new ConfigException("{$where}is empty: it names the file to read the value from");
        }
        $data = is_file($path) && is_readable($path) ? @file_get_contents($path, false, null, 0, self::MAX_ENV_FILE_BYTES + 1) : false;
        if ($data === false) {
            throw new ConfigException("{$where}cannot read {$path}: " . (file_exists($path) ? 'not a readable file' : 'No such file or directory'));
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
     * @param array<string, string>|null $environ null: getenv()
     * @return array<string, mixed> options for {@see Client::__construct()}; keys the file lacks are absent
     * @throws ConfigException naming the file (or variable), line, section and key
     */
    public static function load(string $path, ?array $environ = null): array
    {
        $text = is_file($path) && is_readable($path) ? @file_get_contents($path) : false;
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
        foreach (['redis', 'delayer'] as $name) {
            $ini[$name] ??= [];
            if (!\is_array($ini[$name])) {
                throw new ConfigException("{$path}: [{$name}] must be a section, found a key named {$name}");
            }
        }
        self::overlay($ini, $lines, $environ ?? getenv());
        [$redis, $delayer] = [$ini['redis'], $ini['delayer']];
        // a [redis] value, and an error about one
        $get = static fn (string $key): ?string => self::value($redis, $key);
        $error = static fn (string $key, string $message): ConfigException => self::error($path, $lines, 'redis', $key, $message);
        $base = \dirname(realpath($path) ?: $path);
        $readable = static function (string $key) use ($get, $error, $lines, $base): ?string {
            if (($file = $get($key)) === null) {
                return null;
            }
            // relative to the file's directory, or to the working directory when from the environment
            $dir = \is_string($lines["redis {$key}"] ?? null) ? (getcwd() ?: '.') : $base;
            $full = str_starts_with($file, '/') ? $file : $dir . '/' . $file;
            if (!is_file($full) || !is_readable($full)) {
                throw $error($key, "cannot read {$file}: " . (file_exists($full) ? 'not a readable file' : 'No such file or directory'));
            }
            return $full;
        };

        // In the Rust reader's order, so that every SDK reports the same first error.
        $layout = self::value($delayer, 'layout') ?? Keys::CLASSIC;
        if (!\in_array($layout, Keys::LAYOUTS, true)) {
            throw self::error($path, $lines, 'delayer', 'layout', sprintf('"%s" is not one of classic, topic', $layout));
        }
        $prefix = self::value($delayer, 'key_prefix');
        if ($layout === Keys::TOPIC && $prefix !== null && strpbrk($prefix, '{}') !== false) {
            $why = sprintf('key_prefix %s contains a brace, which the per-topic layout cannot use', self::json($prefix));
            throw self::error($path, $lines, 'delayer', 'key_prefix', $why);
        }
        $config = Sentinels::readConfig($get, $error, $layout);
        if (($url = $get('url')) !== null) {
            RedisUrl::checked($url, $get, $error);
            $config['url'] = $url;
        }
        if (($database = $get('database')) !== null) {
            $database = self::integer($error, 'database', $database, 0, 2147483647);
        }
        $cert = $readable('tls_cert_file');
        $key = $readable('tls_key_file');
        if (($cert === null) !== ($key === null)) {
            throw $cert !== null ? $error('tls_cert_file', 'needs tls_key_file too') : $error('tls_key_file', 'needs tls_cert_file too');
        }
        $port = $get('port');
        $notNull = static fn (mixed $value): bool => $value !== null;
        // What the file sets, as constructor options in their order; what it lacks stays absent.
        return $config + array_filter([
            'host' => $get('host'),
            'port' => $port === null ? null : self::integer($error, 'port', $port, 1, 65535),
            'database' => $database,
            'username' => $get('username'),
            'password' => $get('password'),
            'tls' => array_filter(['cafile' => $readable('tls_ca_file'), 'local_cert' => $cert, 'local_pk' => $key], $notNull) ?: null,
            'prefix' => $prefix,
            'layout' => $layout !== Keys::CLASSIC ? $layout : null,
        ], $notNull);
    }

    /**
     * The file rewritten so that PHP's raw INI scanner reads each value as the
     * server does (";" or "#" comments at a line's start or after whitespace,
     * quoted values, keys ending at "=" or ":"); line numbers are kept.
     *
     * @return array{0: string, 1: array<string, int>, 2: list<array{0: ?string, 1: string, 2: int}>, 3: array<string, int>}
     *         the text, the line of each "section key", every (section, key, line), each section's first line
     */
    private static function normalize(string $text): array
    {
        if (str_starts_with($text, "\u{FEFF}")) {
            $text = substr($text, 3);
        }
        [$out, $lines, $entries, $sections, $section] = [[], [], [], [], null];
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
            // A raw-mode quoted value cannot hold a double quote or end in a backslash: leave those bare.
            $out[] = str_contains($value, '"') || str_ends_with($value, '\\') ? "{$key} = {$value}" : "{$key} = \"{$value}\"";
        }
        return [implode("\n", $out), $lines, $entries, $sections];
    }

    /**
     * The server's rule: every key is a known one of a known section, or an ignored 1.x one
     * (a section without keys is not looked at); the first offender is named, with the closest known name.
     *
     * @param list<array{0: ?string, 1: string, 2: int}> $entries
     * @param array<string, int> $sections
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
            $known = self::KNOWN_KEYS[$section] ?? (str_starts_with($section, 'webhook.') && $section !== 'webhook.' ? self::WEBHOOK_KEYS : null);
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
     * The candidate nearest to $name if a likely typo (at most 2 edits or a third of the name); ties go to the first.
     *
     * @param list<string> $candidates
     */
    private static function closest(string $name, array $candidates): ?string
    {
        $limit = max(2, intdiv(\strlen($name), 3));
        [$best, $bestDistance] = [null, PHP_INT_MAX];
        foreach ($candidates as $candidate) {
            $distance = levenshtein($name, $candidate);
            if ($distance <= $limit && $distance < $bestDistance) {
                [$best, $bestDistance] = [$candidate, $distance];
            }
        }
        return $best;
    }

    /** Cuts an inline comment (";" or "#" after whitespace). */
    private static function stripComment(string $value): string
    {
        return trim((string) preg_replace('/\s[;#].*$/s', '', $value));
    }

    /** @param array<string, mixed> $section */
    private static function value(array $section, string $key): ?string
    {
        if (isset($section[self::ENV][$key])) {
            $value = $section[self::ENV][$key]; // from the environment: as given
        } else {
            // "key[] = ..." is nothing we read
            $value = \is_array($section[$key] ?? null) ? null : trim((string) ($section[$key] ?? ''), " \t\r\n");
        }
        return $value === '' ? null : $value; // null: absent or empty
    }

    /** @param \Closure(string, string): ConfigException $error */
    private static function integer(\Closure $error, string $key, string $value, int $min, int $max): int
    {
        if (preg_match('/^\d{1,10}$/', $value) !== 1 || (int) $value < $min || (int) $value > $max) {
            throw $error($key, sprintf('must be an integer from %d to %d, got %s', $min, $max, self::json($value)));
        }
        return (int) $value;
    }

    private static function json(string $value): string
    {
        return (string) json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE);
    }

    /**
     * "file:line: [section] key: message", or "VARIABLE: [section] key: message" when the environment set it.
     *
     * @param array<string, int|string> $lines
     */
    private static function error(string $path, array $lines, string $section, string $key, string $message): ConfigException
    {
        $from = $lines["{$section} {$key}"] ?? null;
        if (\is_string($from)) {
            return new ConfigException("{$from}: [{$section}] {$key}: {$message}");
        }
        return new ConfigException($path . ($from === null ? '' : ":{$from}") . ": [{$section}] {$key}: {$message}");
    }
}
