<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Keys;
use Delayer\Message;
use Delayer\Ops;
use PHPUnit\Framework\TestCase;

/**
 * Every call builder (Ops) against its script's header, with no Redis: the
 * header (KEYS and ARGV stated once, in lua/) is the contract. The
 * conformance suite checks the same on the wire; this catches a drift first.
 */
final class CallContractTest extends TestCase
{
    private const PREFIX = 'shop:d:';

    /** @return array<string, array{string, list<string>, list<string>}> */
    public static function calls(): array
    {
        $k = new Keys(self::PREFIX);
        $job = Ops::job($k, Message::create('t', 'a', 'x'), 1, 60);
        $calls = [
            Ops::push($k, $job, false),
            ['push_many', ...Ops::pushMany($k, [$job], false)[0]],
            Ops::pop($k, 't'),
            Ops::take($k, 'a'),
            Ops::remove($k, 'a'),
            Ops::reserve($k, 't', 1000),
            Ops::reserveMany($k, 't', 1000, 5, []),
            Ops::ack($k, 'a', '1'),
            Ops::touch($k, 'a', '1', 1000),
            Ops::release($k, 'a', '1', 'backoff', 'boom'),
            Ops::reschedule($k, 'a', 1),
            Ops::deadList($k, 't', 0, 10),
            Ops::deadAction($k, 't', 'requeue', ['a']),
            Ops::deadAction($k, 't', 'purge', null),
        ];
        $out = [];
        foreach ($calls as $i => $call) {
            $out["{$call[0]} #{$i}"] = [$call[0], array_values($call[1]), array_values($call[2])];
        }
        return $out;
    }

    /**
     * The header's KEYS: [name pattern, optional] per key, in order.
     *
     * @return list<array{string, bool}>
     */
    private static function headerKeys(string $script): array
    {
        $keys = [];
        foreach (file(\dirname(__DIR__) . "/lua/{$script}.lua", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (!str_starts_with($line, '--')) {
                break;
            }
            if (preg_match('/^-- KEYS\[(\d+)\]\s+(.*)$/', $line, $m) === 1) {
                self::assertSame(\count($keys) + 1, (int) $m[1], "{$script}.lua: KEYS out of order");
                self::assertSame(1, preg_match('/<prefix>\S*/', $m[2], $name), $line);
                $keys[] = [$name[0], str_contains($m[2], 'optional')];
            }
        }
        return $keys;
    }

    /**
     * @dataProvider calls
     * @param list<string> $keys
     * @param list<string> $argv
     */
    public function testKeysAreTheHeaders(string $script, array $keys, array $argv): void
    {
        $header = self::headerKeys($script);
        $required = \count(array_filter($header, fn (array $k): bool => !$k[1]));
        self::assertGreaterThanOrEqual($required, \count($keys), "{$script}.lua: too few KEYS");
        self::assertLessThanOrEqual(\count($header), \count($keys), "{$script}.lua: too many KEYS");
        foreach ($keys as $i => $key) {
            $rx = preg_replace('/<[a-z_]+>/', '.+', str_replace('<prefix>', preg_quote(self::PREFIX, '/'), $header[$i][0]));
            self::assertMatchesRegularExpression("/^{$rx}$/s", $key, "{$script}.lua KEYS[" . ($i + 1) . ']');
        }
        self::assertNotContains(self::PREFIX, $argv, "{$script}.lua gets the bare prefix to build names from");
    }
}
