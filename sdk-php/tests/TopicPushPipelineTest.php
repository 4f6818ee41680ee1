<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Ops;

/**
 * A per-topic push sends its index write with the script, in one round trip
 * (docs/PROTOCOL.md, "push sends its index write with the script"): the
 * decision once push.lua answered, with synthetic times (Ops does no I/O),
 * and on a real redis-server whose script cache was flushed, the wake that
 * must follow a pipeline sent again after NOSCRIPT.
 */
final class TopicPushPipelineTest extends RedisTestCase
{
    private const P = 'tp:';

    public function testTheEstimateIsTheClientsClockPlusTheDelay100MsEarly(): void
    {
        self::assertSame('1002.400', Ops::pushEstimate(2000, 1000.5));
        self::assertSame('999.999', Ops::pushEstimate(0, 1000.0999));
    }

    public function testWhatFollowsThePipeline(): void
    {
        // the estimate later than the answered due time (the clocks disagree): write again
        self::assertSame(Ops::WRITE_AGAIN, Ops::pushFollowUp('100.101', '100.100', false, false));
        self::assertSame(Ops::WRITE_AGAIN, Ops::pushFollowUp('100.101', '100.100', true, true));
        // not later: wake when the early ZADD lowered the index, or may have (sent again after NOSCRIPT)
        self::assertSame(Ops::WAKE, Ops::pushFollowUp('100.100', '100.100', true, false));
        self::assertSame(Ops::WAKE, Ops::pushFollowUp('100.000', '100.100', false, true));
        self::assertNull(Ops::pushFollowUp('100.000', '100.100', false, false));
    }

    public function testAfterScriptFlushAPushOnANewTopicStillWakesTheServer(): void
    {
        $client = new Client([
            'host' => '127.0.0.1', 'port' => RedisServer::shared()->port, 'timeout' => 2,
            'layout' => 'topic', 'prefix' => self::P,
        ]);
        $wake = new WakeListener(RedisServer::shared()->port, self::P . 'wake');
        try {
            $client->pushTo('warm', '1', 100);
            self::assertNotNull($wake->next());
            // The next push's first pipeline finds no script: its ZADD lowers
            // the index (a new topic) and nothing is pushed; sent again, its
            // ZADD lowers nothing. The wake must go all the same.
            $this->redis->script('flush');
            self::assertTrue($client->pushTo('new', '1', 100));
            $due = $this->redis->zScore(self::P . '{new}:pool', '1');
            self::assertIsFloat($due);
            $held = $this->redis->zScore(self::P . 'due', 'new');
            self::assertIsFloat($held);
            self::assertTrue($held <= $due && $held > $due - 1, "index {$held}, due {$due}");
            self::assertTrue($this->redis->sIsMember(self::P . 'topics', 'new'));
            self::assertSame($due, (float) $wake->next(), 'the wake after a pipeline sent again, with the due time');
        } finally {
            $wake->close();
            $client->close();
        }
    }
}
