<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Keys;
use Delayer\Message;
use Delayer\Calls;
use PHPUnit\Framework\TestCase;

/**
 * Every call builder (Calls) against its script's header, with no Redis: the
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
        $job = Calls::job($k, Message::create('t', 'a', 'x'), 1, 60);
        $calls = [
            Calls::push($k, $job, false),
            \array_slice(Calls::pushMany($k, [$job], false)[0], 0, 3),
            Calls::pop($k, 't'),
            Calls::take($k, 'a', 't'),
            Calls::remove($k, 'a'),
            Calls::reserve($k, 't', 1000),
            Calls::reserveMany($k, 't', 1000, 5, []),
            Calls::ack($k, 'a', '1'),
            Calls::touch($k, 'a', '1', 1000),
            Calls::release($k, 'a', '1', 'backoff', 'boom'),
            Calls::reschedule($k, 'a', 1),
            Calls::deadList($k, 't', 0, 10),
            Calls::deadAction($k, 't', 'requeue', ['a']),
            Calls::deadAction($k, 't', 'purge', null),
            Calls::flow($k, 't', 'pause'),
            Calls::lookup($k, 't', 'a'),
            Calls::stats($k),
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

    /** @return array<string, array{string, list<string>, list<string>}> */
    public static function moreCalls(): array
    {
        $k = new Keys(self::PREFIX);
        $t = new Keys(self::PREFIX, Keys::TOPIC);
        $job = Calls::job($t, Message::create('t', 'a', 'x'), 1, 60);
        $calls = [
            Calls::release($k, 'a', '1', '1000'), // no error text: ARGV[8] ""
            Calls::release($k, 'a', '', 'bury'),
            Calls::reserveMany($k, 't', 1000, 5, [['a', '1'], ['b', '']]),
            Calls::reserveMany($k, 't', 1000, 0, [['a', '1']]),
            // the per-topic layout's scripts (their key names: TopicLayoutTest)
            Calls::push($t, $job, true),
            \array_slice(Calls::pushMany($t, [$job, $job], false)[0], 0, 3),
            Calls::remove($t, 'a', 't'),
            Calls::release($t, 'a', '1', 'backoff', 'boom', 't'),
            Calls::release($t, 'a', '', 'bury', '', 't'),
            Calls::deadList($t, 't', 0, 10),
            Calls::deadAction($t, 't', 'requeue', ['a', 'b']),
            Calls::flow($t, 't', 'get'),
            Calls::flow($t, 't', 'limit', 0.5, 2),
            Calls::flow($k, 't', 'limit', 100),
            Calls::flow($k, 't', 'unlimit'),
            Calls::lookup($t, 't', 'a'),
        ];
        $out = self::calls();
        foreach ($calls as $i => $call) {
            $out["{$call[0]} more #{$i}"] = [$call[0], array_values($call[1]), array_values($call[2])];
        }
        return $out;
    }

    /** The last ARGV[n] the header lists as its own line. */
    private static function headerArgc(string $script): int
    {
        $n = 0;
        foreach (file(\dirname(__DIR__) . "/lua/{$script}.lua", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (!str_starts_with($line, '--')) {
                break;
            }
            if (preg_match('/^-- ARGV\[(\d+)\]\s/', $line, $m) === 1) {
                $n = (int) $m[1];
            }
        }
        return $n;
    }

    /**
     * One shape per script (issue 21): every KEYS and ARGV the header lists,
     * "" for none; a script with a mode or a list: its mode's count, or the
     * fixed head and whole groups.
     *
     * @dataProvider moreCalls
     * @param list<string> $keys
     * @param list<string> $argv
     */
    public function testEveryCallSendsEveryArgvItsHeaderLists(string $script, array $keys, array $argv): void
    {
        self::assertCount(\count(self::headerKeys($script)), $keys, "{$script}.lua KEYS");
        $n = \count($argv);
        switch ($script) {
            case 'release':
                self::assertSame(['held' => 8, 'expired' => 5][$argv[3]], $n, 'release.lua ARGV');
                break;
            case 'release_topic': // no dead-letter prefix
                self::assertSame(['held' => 7, 'expired' => 4][$argv[2]], $n, 'release_topic.lua ARGV');
                break;
            case 'reserve': // ARGV[1..3], the pairs (batch mode), the wake channel last
                if ($argv[2] === '') {
                    self::assertSame(4, $n, 'reserve.lua one job');
                } else {
                    self::assertTrue($n >= 4 && ($n - 4) % 2 === 0, "reserve.lua batch: {$n} ARGV");
                }
                break;
            case 'push_many':
            case 'push_many_topic':
                self::assertTrue($n > 3 && ($n - 3) % 10 === 0, "{$script}.lua: {$n} ARGV");
                break;
            case 'dead':
            case 'dead_topic':
                self::assertGreaterThanOrEqual(4, $n); // a mode's count: the conformance suite checks it
                break;
            default:
                self::assertSame(self::headerArgc($script), $n, "{$script}.lua ARGV");
        }
    }
}
