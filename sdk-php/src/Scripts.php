<?php

declare(strict_types=1);

namespace Delayer;


/**
 * The one place where this SDK knows the Lua scripts: names, limits, and
 * source, read and hashed once per process from sdk-php/lua/ (copies of lua/).
 */
final class Scripts
{
    /** The scripts, by their file's name (lua/<name>.lua); each one's header states its KEYS, ARGV and reply. */
    public const PUSH = 'push';
    public const PUSH_MANY = 'push_many';
    public const POP = 'pop';
    public const TAKE = 'take';
    public const REMOVE = 'remove';
    public const RESERVE = 'reserve';
    public const ACK = 'ack';
    public const TOUCH = 'touch';
    public const RELEASE = 'release';
    public const RESCHEDULE = 'reschedule';
    public const DEAD = 'dead';
    public const LOOKUP = 'lookup';
    public const LIST = 'list';
    public const STATS = 'stats';
    public const FLOW = 'flow';

    /** The per-topic layout's script for each classic one whose work differs by layout (one shape per script, issue 21). */
    public const PER_TOPIC = [
        self::PUSH => 'push_topic', self::PUSH_MANY => 'push_many_topic', self::REMOVE => 'remove_topic', self::DEAD => 'dead_topic', self::RELEASE => 'release_topic',
        self::FLOW => 'flow_topic',
    ];

    /** Every script this SDK ships (lua/<name>.lua). */
    public const NAMES = [
        self::PUSH, self::PUSH_MANY, self::POP, self::TAKE, self::REMOVE,
        self::RESERVE, self::ACK, self::TOUCH, self::RELEASE, self::RESCHEDULE, self::DEAD,
        self::LOOKUP, self::LIST, self::STATS, self::FLOW, 'push_topic', 'push_many_topic', 'remove_topic', 'dead_topic', 'release_topic',
        'flow_topic',
    ];

    /** flow.lua's actions: read, pause, resume, rate-limit or unlimit a topic. */
    public const FLOW_ACTIONS = ['get', 'pause', 'resume', 'limit', 'unlimit'];

    /** push.lua's duplicate policies: a taken id's job is replaced (1.x), or left alone and reported. */
    public const REPLACE = 'replace';
    public const IF_ABSENT = 'absent';

    /** The most jobs one push_many.lua call takes. */
    public const PUSH_MANY_MAX_JOBS = 100;

    /** How many push_many.lua calls pushMany() sends per pipeline (one round trip). */
    public const PUSH_MANY_CALLS_PER_PIPELINE = 10;

    /** The most jobs one reserve.lua call reserves in batch mode (and, here, the most acks one call sends). */
    public const RESERVE_MAX_JOBS = 1000;

    /** The most bytes of an error text release.lua keeps (last_error). */
    public const ERROR_MAX_BYTES = 1000;

    /** The most dead letters one dead.lua call lists, re-queues or purges. */
    public const DEAD_MAX_PER_CALL = 1000;

    /** @var array<string, string> script name => source */
    private static array $sources = [];

    /** @var array<string, string> script name => SHA1 */
    private static array $shas = [];

    private function __construct()
    {
    }

    /** The directory holding the shipped scripts (sdk-php/lua). */
    public static function directory(): string
    {
        return \dirname(__DIR__) . '/lua';
    }

    /** @param value-of<self::NAMES> $name */
    public static function source(string $name): string
    {
        if (!isset(self::$sources[$name])) {
            if (!\in_array($name, self::NAMES, true)) {
                throw new \LogicException("unknown script {$name}");
            }
            $path = self::directory() . '/' . $name . '.lua';
            $source = @file_get_contents($path);
            if ($source === false) {
                throw new \LogicException("cannot read the Lua script {$path}");
            }
            self::$sources[$name] = $source;
        }
        return self::$sources[$name];
    }

    /** @param value-of<self::NAMES> $name */
    public static function sha(string $name): string
    {
        return self::$shas[$name] ??= sha1(self::source($name));
    }
}
