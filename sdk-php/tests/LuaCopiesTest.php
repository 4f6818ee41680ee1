<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Scripts;
use PHPUnit\Framework\TestCase;

/** sdk-php/lua must hold byte-identical copies of the repository's lua/ scripts. */
final class LuaCopiesTest extends TestCase
{
    /** @return array<string, array{string}> */
    public static function scripts(): array
    {
        $scripts = [];
        foreach (Scripts::NAMES as $name) {
            $scripts[$name] = [$name];
        }
        return $scripts;
    }

    public function testOnlyTheClientScriptsAreShipped(): void
    {
        $names = array_map('basename', glob(\dirname(__DIR__) . '/lua/*.lua') ?: []);
        sort($names);
        // move(_topic).lua and the like are the server's alone; release(_topic).lua
        // is shipped for its "held" mode (its "expired" mode is the server's too).
        self::assertSame([
            'ack.lua', 'dead.lua', 'dead_topic.lua', 'flow.lua', 'flow_topic.lua', 'list.lua', 'lookup.lua', 'pop.lua', 'push.lua', 'push_many.lua',
            'push_many_topic.lua', 'push_topic.lua', 'release.lua', 'release_topic.lua', 'remove.lua', 'remove_topic.lua',
            'reschedule.lua', 'reserve.lua', 'stats.lua', 'take.lua', 'touch.lua',
        ], $names);
        $known = array_map(static fn (string $name): string => "{$name}.lua", Scripts::NAMES);
        sort($known);
        self::assertSame($names, $known, 'Scripts::NAMES lists every shipped script');
    }

    /** @dataProvider scripts */
    public function testCopyIsByteIdenticalToRepositoryScript(string $name): void
    {
        $original = \dirname(__DIR__, 2) . "/lua/{$name}.lua";
        $copy = \dirname(__DIR__) . "/lua/{$name}.lua";
        self::assertFileExists($original);
        self::assertFileExists($copy);
        self::assertSame(
            hash_file('sha256', $original),
            hash_file('sha256', $copy),
            "sdk-php/lua/{$name}.lua differs from lua/{$name}.lua: copy it again (cp lua/{$name}.lua sdk-php/lua/)"
        );
        self::assertSame(file_get_contents($original), Scripts::source($name));
        self::assertSame(sha1_file($original), Scripts::sha($name));
    }
}
