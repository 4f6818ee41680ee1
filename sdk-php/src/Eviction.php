<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\RedisErrorException;

/**
 * Whether Redis may evict job data (issue 20, item 3): under any maxmemory-policy
 * but noeviction a full Redis deletes keys, so jobs vanish. The {@see Worker}
 * reads the policy at start and after every reconnect; an instance says which
 * readings are logged: the first, the first after an outage, a change.
 *
 * @internal used by {@see Worker}
 */
final class Eviction
{
    /** Logged, with the policy, unless it is noeviction (the same words in every SDK and the server). */
    public const WARNING = 'redis maxmemory-policy is %s: Redis may evict job data and lose jobs; set maxmemory-policy'
        . ' noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)';

    /** Logged when neither CONFIG GET nor INFO would tell the policy. */
    public const UNREADABLE = 'cannot read redis maxmemory-policy (CONFIG GET and INFO memory were refused); unless it is'
        . ' noeviction, Redis may evict job data and lose jobs';

    private bool $first = true;
    private bool $outage = false;
    private ?string $last = null;

    /**
     * The policy by CONFIG GET, or INFO memory where CONFIG is refused; null when both are.
     *
     * @throws Exception\ConnectionException
     */
    public static function read(RedisLink $link): ?string
    {
        try {
            $reply = $link->commands([['CONFIG', ['GET', 'maxmemory-policy']]])[0];
            if (\is_array($reply)) {
                $reply = array_values($reply);
                for ($i = 0; $i + 1 < \count($reply); $i += 2) {
                    if ($reply[$i] === 'maxmemory-policy' && \is_string($reply[$i + 1])) {
                        return $reply[$i + 1];
                    }
                }
            }
        } catch (RedisErrorException) {
            // refused (an ACL user without CONFIG): INFO tells the same
        }
        try {
            $info = $link->commands([['INFO', ['memory']]])[0];
        } catch (RedisErrorException) {
            return null;
        }
        if (\is_string($info) && preg_match('/^maxmemory_policy:(\S+)/m', $info, $m) === 1) {
            return $m[1];
        }
        return null;
    }

    /** What to log for $policy (null: it could not be read); null when it is safe. */
    public static function warning(?string $policy): ?string
    {
        if ($policy === null) {
            return self::UNREADABLE;
        }
        return strtolower(trim($policy)) === 'noeviction' ? null : sprintf(self::WARNING, $policy);
    }

    /** Redis could not be reached: the next reading is logged. */
    public function outage(): void
    {
        $this->outage = true;
    }

    /** Logs {@see warning()}'s line for $policy when this reading is to be logged. */
    public function report(?string $policy, WorkerHooks $hooks): void
    {
        $say = $this->first || $this->outage || $policy !== $this->last;
        $this->first = false;
        $this->outage = false;
        $this->last = $policy;
        $line = $say ? self::warning($policy) : null;
        if ($line !== null) {
            $hooks->log('warning', $line);
        }
    }
}
