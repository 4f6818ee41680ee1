<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Exception\IdTakenException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Job;
use Delayer\Keys;
use Delayer\Message;
use Delayer\Calls;
use Delayer\ScheduledMessage;
use Delayer\Worker;

/**
 * The per-topic layout (issue 12; docs/PROTOCOL.md "The per-topic layout"
 * and "Operations in the per-topic layout"), on a real redis-server: the
 * exact keys every operation writes (`<prefix>{<topic>}:...`), ids per
 * topic, the announcement ("<time> <topic>" on `<prefix>wake`) a script
 * sends when it writes a time before its set's head (the SDK writes no
 * index: the server keeps it), the refusals that name the layout,
 * and delayer.conf's `layout = topic`. The test plays the server with the
 * repository's lua/move_topic.lua.
 */
final class TopicLayoutTest extends RedisTestCase
{
    private const P = 'tl:';

    /** @param array<string, mixed> $config */
    private function topicClient(array $config = []): Client
    {
        return $this->client($config + ['layout' => 'topic', 'prefix' => self::P]);
    }

    /** `<prefix>{<topic>}:<kind>`, written out here on purpose: the protocol's names, not the SDK's. */
    private static function key(string $topic, string $kind): string
    {
        return self::P . '{' . $topic . '}:' . $kind;
    }

    /** Runs lua/move_topic.lua on $topic until $expected ids were moved (waiting for future ones), or fails. */
    private function moveTopic(string $topic, int $expected, float $deadline = 10.0): void
    {
        $source = (string) file_get_contents(self::repoLuaDir() . '/move_topic.lua');
        $until = microtime(true) + $deadline;
        $taken = 0;
        while (true) {
            $r = $this->redis->eval($source, [self::key($topic, 'pool'), self::key($topic, 'ready'), self::key($topic, 'reserved'), self::key($topic, 'flow'), '1000'], 4);
            self::assertIsArray($r, 'move_topic.lua failed: ' . $this->redis->getLastError());
            $taken += (int) $r[0];
            if ($taken >= $expected) {
                self::assertSame($expected, $taken, 'move_topic.lua moved more ids than expected');
                return;
            }
            self::assertLessThan($until, microtime(true), "move_topic.lua moved {$taken} of {$expected} ids within {$deadline} s");
            usleep(5000);
        }
    }

    /**
     * The next announcement on $wake: [time, topic].
     *
     * @return array{0: float, 1: string}
     */
    private static function announced(WakeListener $wake): array
    {
        $message = (string) $wake->next();
        self::assertMatchesRegularExpression('/^\d+\.\d{3} \S+$/', $message, 'an announcement: "<time> <topic>"');
        [$time, $topic] = explode(' ', $message, 2);
        return [(float) $time, $topic];
    }

    /**
     * Every call builder of the per-topic layout against its script's
     * header, with no Redis: the _topic script where the work differs by
     * layout (no scheduled counts), every KEYS its header lists, each in the
     * topic's hash slot (the PROTOCOL's per-topic names), the wake channel
     * for every script that announces, and release_topic.lua's KEYS[4] the
     * topic's dead list, with no dead-letter prefix in its ARGV.
     */
    public function testEveryCallNamesOnlyItsTopicsKeys(): void
    {
        $k = new Keys(self::P, Keys::TOPIC);
        $job = Calls::job($k, Message::create('a', 't', 'x'), 1, 60);
        $calls = [
            Calls::push($k, $job, false),
            \array_slice(Calls::pushMany($k, [$job], false)[0], 0, 3),
            Calls::pop($k, 't'),
            Calls::take($k, 'a', 't'),
            Calls::remove($k, 'a', 't'),
            Calls::reserve($k, 't', 1000),
            Calls::reserveMany($k, 't', 1000, 5, []),
            Calls::ack($k, 'a', '1', 't'),
            Calls::touch($k, 'a', '1', 1000, 't'),
            Calls::release($k, 'a', '1', 'backoff', 'boom', 't'),
            Calls::reschedule($k, 'a', 1, 't'),
            Calls::deadList($k, 't', 0, 10),
            Calls::deadAction($k, 't', 'requeue', ['a']),
        ];
        $perTopic = [
            'job_pool' => 'pool', 'job_bucket:<id>' => 'job:a', 'ready_queue:<topic>' => 'ready', 'malformed' => 'malformed',
            'reserved' => 'reserved', 'receipt_seq' => 'receipt_seq', 'dead:<topic>' => 'dead',
            'outcomes' => 'outcomes', 'flow:<topic>' => 'flow', 'flow_gate:<topic>' => 'gate',
        ];
        foreach ($calls as [$script, $keys, $argv]) {
            $header = [];
            foreach (file(self::repoLuaDir() . "/{$script}.lua", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
                if (preg_match('/^-- KEYS\[\d+\]\s.*?<prefix>(\S+)/', $line, $m) === 1) {
                    $header[] = $m[1];
                }
            }
            if ($script === 'release_topic') {
                self::assertSame(self::key('t', 'dead'), $keys[3], 'release_topic.lua KEYS[4]: the topic\'s dead list');
                self::assertSame([self::key('t', 'job:'), 'backoff', 'held'], \array_slice($argv, 0, 3), 'release_topic.lua ARGV[1..3]');
                self::assertSame(self::P . 'wake', $argv[5], 'release_topic.lua ARGV[6]: the wake channel');
            }
            $expected = array_map(fn (string $name): string => self::key('t', $perTopic[$name] ?? "? {$name}"), $header);
            self::assertSame($expected, $keys, "{$script}.lua KEYS");
            self::assertNotContains(self::P, $argv);
        }
        self::assertSame(
            ['push_topic', 'push_many_topic', 'remove_topic', 'release_topic', 'dead_topic', 'dead_topic'],
            [$calls[0][0], $calls[1][0], $calls[4][0], $calls[9][0], $calls[11][0], $calls[12][0]],
            'the per-topic layout\'s own scripts where the work differs',
        );
        $wake = self::P . 'wake';
        self::assertSame([$wake, $wake], [$calls[0][2][10], $calls[1][2][2]], 'push.lua ARGV[11], push_many.lua ARGV[3]');
        self::assertSame($wake, $calls[10][2][2], 'reschedule.lua ARGV[3]');
        self::assertSame(['', $wake], \array_slice($calls[5][2], 2), 'reserve.lua: one job, then the channel');
        self::assertSame(['5', $wake], \array_slice($calls[6][2], 2), 'reserve.lua batch: n, no acks, the channel');
        self::assertSame($wake, $calls[8][2][3], 'touch.lua ARGV[4]');
        self::assertSame("requeue {$wake}", $calls[12][2][2], 'dead.lua: the channel rides on the action');
        self::assertSame(self::key('t', 'job:'), $calls[2][2][0], 'the bucket prefix');
    }

    public function testPushWritesTheTopicsKeysAndTheIndexAndIdsArePerTopic(): void
    {
        $client = $this->topicClient();
        $before = $this->redisTime();
        self::assertTrue($client->pushTo('mail', 'a', 30, 'to mail'));
        self::assertTrue($client->push(Message::create('a', 'sms', 'to sms'), 60)); // 1.x's push, same id

        $score = $this->redis->zScore(self::key('mail', 'pool'), 'a');
        self::assertEqualsWithDelta($before + 30, $score, 5);
        // the per-topic layout's bucket keeps its due time (the ready-queue age reads it)
        $mailJob = $this->redis->hGetAll(self::key('mail', 'job:a'));
        self::assertSame(['topic' => 'mail', 'body' => 'to mail'], array_diff_key($mailJob, ['due' => 0]));
        self::assertEqualsWithDelta($score, (float) $mailJob['due'], 0.0005);
        self::assertSame(['topic', 'body', 'due'], array_keys($this->redis->hGetAll(self::key('sms', 'job:a'))));
        self::assertGreaterThan(0, $this->redis->ttl(self::key('mail', 'job:a')));
        // nothing of the classic layout, no index (the server's), and no other key
        $keys = $this->redis->keys(self::P . '*');
        sort($keys);
        self::assertSame([
            self::key('mail', 'job:a'), self::key('mail', 'pool'), self::key('sms', 'job:a'), self::key('sms', 'pool'),
        ], $keys);
        self::assertSame('topic', $client->getKeys()->layout());

        // ids per topic: removing one leaves the other
        self::assertTrue($client->remove('a', 'mail'));
        self::assertSame(0, $this->redis->exists(self::key('mail', 'job:a')));
        self::assertFalse($this->redis->zScore(self::key('mail', 'pool'), 'a'));
        self::assertSame(1, $this->redis->exists(self::key('sms', 'job:a')));
        self::assertFalse($client->remove('a', 'mail'));
    }

    public function testAWriteBeforeItsSetsHeadIsAnnouncedWithItsTopic(): void
    {
        $client = $this->topicClient();
        $wake = new WakeListener(RedisServer::shared()->port, self::P . 'wake');
        try {
            $client->pushTo('mail', 'late', 60);
            $late = $this->redis->zScore(self::key('mail', 'pool'), 'late');
            self::assertSame([$late, 'mail'], self::announced($wake), 'an empty pool: announced');
            $client->pushTo('mail', 'later', 120); // after the head: nothing
            $client->pushTo('mail', 'sooner', 30);
            $sooner = $this->redis->zScore(self::key('mail', 'pool'), 'sooner');
            self::assertSame([$sooner, 'mail'], self::announced($wake), 'the next message is the earlier push, none for the later');

            // reschedule: later says nothing, earlier announces
            self::assertIsFloat($client->reschedule('late', 300, 'mail'));
            $due = $client->reschedule('late', 5, 'mail');
            self::assertSame([$due, 'mail'], self::announced($wake));

            // push_many: one message per call at most, the earliest; mail's head is earlier than z
            $client->pushMany([[Message::create('x', 'sms', ''), 50], [Message::create('y', 'sms', ''), 20], [Message::create('z', 'mail', ''), 200]]);
            self::assertSame([$this->redis->zScore(self::key('sms', 'pool'), 'y'), 'sms'], self::announced($wake), 'one message, for sms only');

            // reserve announces its deadline into an empty reserved set, a shorter touch the new one
            $client->pushTo('dl', 'd', 0);
            self::assertSame('dl', self::announced($wake)[1]);
            $this->moveTopic('dl', 1);
            $job = $client->reserve('dl', 30) ?: self::fail('no job');
            self::assertSame([$job->deadline, 'dl'], self::announced($wake));
            self::assertIsFloat($client->touch($job, 60)); // later: nothing
            $touched = $client->touch($job, 10);
            self::assertSame([$touched, 'dl'], self::announced($wake), 'a shorter touch brings the deadline in');

            // a release with a delay, into an empty pool; a bury (dead) says nothing; a requeue is due now
            self::assertTrue($client->release($job, 2));
            self::assertSame([$this->redis->zScore(self::key('dl', 'pool'), 'd'), 'dl'], self::announced($wake));
            $this->redis->zAdd(self::key('dl', 'pool'), 0, 'd');
            $this->moveTopic('dl', 1);
            $again = $client->reserve('dl', 30) ?: self::fail('no job');
            self::assertSame('dl', self::announced($wake)[1]);
            self::assertTrue($client->bury($again));
            self::assertSame(1, $client->requeueDead('dl'));
            [$now, $topic] = self::announced($wake);
            self::assertSame('dl', $topic);
            self::assertEqualsWithDelta($this->redis->zScore(self::key('dl', 'pool'), 'd'), $now, 0.0005, 're-queued, due now');
        } finally {
            $wake->close();
        }
    }

    public function testAUserWhoMayNotPublishStillPushes(): void
    {
        $user = 'tl-nopub';
        $this->redis->rawCommand('ACL', 'SETUSER', $user, 'reset', 'on', '>nopub-Secret-1', '~*', 'resetchannels', '+@all');
        try {
            $client = $this->topicClient(['username' => $user, 'password' => 'nopub-Secret-1']);
            self::assertTrue($client->pushTo('acl', '1', 60));
            self::assertIsFloat($this->redis->zScore(self::key('acl', 'pool'), '1'), 'pushed; the refused PUBLISH ignored');
            self::assertTrue($client->remove('1', 'acl'));
        } finally {
            $this->redis->rawCommand('ACL', 'DELUSER', $user);
        }
    }

    public function testPushManyMakesOneCallPerTopicAndKeepsTheInputOrder(): void
    {
        $keys = new Keys(self::P, Keys::TOPIC);
        $jobs = [];
        foreach ([['mail', 'a'], ['sms', 'a'], ['mail', 'b']] as [$topic, $id]) {
            $jobs[] = Calls::job($keys, Message::create($id, $topic, ''), 1, 60);
        }
        for ($i = 0; $i < 101; $i++) {
            $jobs[] = Calls::job($keys, Message::create("n{$i}", 'bulk', ''), 1, 60);
        }
        $calls = Calls::pushMany($keys, $jobs, false);
        self::assertSame(array_fill(0, 4, 'push_many_topic'), array_column($calls, 0));
        self::assertSame([[self::key('mail', 'pool')], [self::key('sms', 'pool')], [self::key('bulk', 'pool')], [self::key('bulk', 'pool')]], array_column($calls, 1));
        self::assertSame([[0, 2], [1], range(3, 102), [103]], array_column($calls, 3));
        self::assertSame([self::key('mail', 'job:'), 'replace', self::P . 'wake'], \array_slice($calls[0][2], 0, 3), 'bucket prefix, policy, wake channel');

        $client = $this->topicClient();
        self::assertSame(3, $client->pushMany([
            new ScheduledMessage(Message::create('a', 'mail', 'm'), 5),
            [Message::create('a', 'sms', 's'), 1],
            [Message::create('b', 'mail', 'b'), 2],
        ]));
        self::assertSame(['b', 'a'], $this->redis->zRange(self::key('mail', 'pool'), 0, -1));
        self::assertSame(['a'], $this->redis->zRange(self::key('sms', 'pool'), 0, -1));
        self::assertSame('s', $this->redis->hGet(self::key('sms', 'job:a'), 'body'));

        try {
            $client->pushMany([[Message::create('a', 'sms', ''), 9], [Message::create('new', 'mail', ''), 9], [Message::create('a', 'mail', ''), 9]], true);
            self::fail('expected IdTakenException');
        } catch (IdTakenException $e) {
            self::assertSame([['a', 'sms'], ['a', 'mail']], array_map(static fn ($t): array => [$t->id, $t->topic], $e->taken));
            self::assertNull($e->dues[0]);
            self::assertEqualsWithDelta($this->redis->zScore(self::key('mail', 'pool'), 'new'), $e->dues[1], 0.0005);
            self::assertNull($e->dues[2]);
        }
        self::assertSame('m', $this->redis->hGet(self::key('mail', 'job:a'), 'body'), 'the taken id kept its job');
    }

    public function testPopAndBpopTakeFromTheTopicsReadyList(): void
    {
        $client = $this->topicClient();
        $client->pushTo('mail', 'a', 0, 'one');
        $client->pushTo('mail', 'b', 0, 'two');
        $client->pushTo('sms', 'a', 0, 'other topic');
        self::assertFalse($client->pop('mail'), 'not moved yet');
        $this->moveTopic('mail', 2);
        self::assertSame(2, $this->redis->lLen(self::key('mail', 'ready')));

        $first = $client->pop('mail');
        self::assertSame(['a', 'mail', 'one'], [$first->id, $first->topic, $first->body]);
        self::assertSame(0, $this->redis->exists(self::key('mail', 'job:a')));
        $second = $client->bPop('mail', 1);
        self::assertSame(['b', 'mail', 'two'], [$second->id, $second->topic, $second->body]);
        self::assertFalse($client->bPop('mail', 0.05));
        self::assertSame(1, $this->redis->exists(self::key('sms', 'job:a')), 'the same id on another topic is another job');

        // bpop wakes for a job moved while it waits, then runs take.lua on the topic's keys
        $this->moveTopic('sms', 1);
        $job = $client->bPop('sms', 2);
        self::assertSame(['a', 'other topic'], [$job->id, $job->body]);
        self::assertSame([], $this->redis->keys(self::P . '{*'), 'every job taken');
    }

    public function testReservationsLiveInTheTopicsKeys(): void
    {
        $client = $this->topicClient();
        $client->schedule(Message::create('a', 'mail', 'A')->withMaxAttempts(2)->withBackoff(Backoff::fixed(60)), 0);
        $client->pushTo('mail', 'b', 0, 'B');
        $this->moveTopic('mail', 2);

        $job = $client->reserve('mail', 30);
        self::assertSame(['a', 'mail', 1, 2, '1'], [$job->id, $job->topic, $job->attempts, $job->maxAttempts, $job->receipt]);
        self::assertSame('1', $this->redis->get(self::key('mail', 'receipt_seq')));
        $deadlineMs = $this->redis->zScore(self::key('mail', 'reserved'), 'a');
        self::assertEqualsWithDelta($job->deadline * 1000, $deadlineMs, 1);
        self::assertSame(0, $this->redis->exists(self::P . 'reserved', self::P . 'receipt_seq', self::P . 'malformed'));

        $touched = $client->touch($job, 120);
        self::assertGreaterThan($job->deadline, $touched);

        // release: back into the topic's pool after its backoff; then out of attempts: the topic's dead list
        self::assertTrue($client->release($job, null, null, 'boom'));
        $due = $this->redis->zScore(self::key('mail', 'pool'), 'a');
        self::assertEqualsWithDelta($job->deadline + 30, $due, 5, 'the backoff (60 s) from now');
        $this->redis->zAdd(self::key('mail', 'pool'), 0, 'a');
        $this->moveTopic('mail', 1);
        $client->pushTo('mail', 'c', 0); // waits in the pool for now
        $again = $client->reserve('mail', 30);
        self::assertSame(['b', 1], [$again->id, $again->attempts], 'b was ready first');
        $retry = $client->reserve('mail', 30);
        self::assertSame(['a', 2], [$retry->id, $retry->attempts]);
        self::assertTrue($client->release($retry));
        self::assertSame(['a'], $this->redis->lRange(self::key('mail', 'dead'), 0, -1));
        self::assertSame(0, $this->redis->exists(self::P . 'dead:mail', self::P . 'scheduled_count'));

        // by id: the topic is needed, and enough
        self::assertTrue($client->ack('b', null, 'mail'));
        self::assertSame(0, $this->redis->exists(self::key('mail', 'job:b')));
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->ack('b'), $client);
        try {
            $client->release('b', 1);
            self::fail('expected InvalidArgumentException');
        } catch (InvalidArgumentException $e) {
            self::assertStringContainsString('release() needs the topic in the per-topic layout', $e->getMessage());
        }

        // dead letters of the topic
        $dead = $client->deadLetters('mail');
        self::assertSame([['a', 'mail', 'max_attempts', 2]], array_map(static fn ($d): array => [$d->id, $d->topic, $d->reason, $d->attempts], $dead));
        self::assertSame(1, $client->purgeDead('mail', ['a']));
        self::assertSame(0, $this->redis->exists(self::key('mail', 'job:a'), self::key('mail', 'dead')));

        // bury by id, touch by id, then the reservation of c ends
        $this->moveTopic('mail', 1);
        $c = $client->bReserve('mail', 30, 2);
        self::assertSame('c', $c->id);
        self::assertIsFloat($client->touch('c', 10, $c->receipt, 'mail'));
        self::assertTrue($client->bury('c', null, 'given up', 'mail'));
        self::assertSame(['c'], $this->redis->lRange(self::key('mail', 'dead'), 0, -1));
        self::assertSame('given up', $this->redis->hGet(self::key('mail', 'job:c'), 'last_error'));
        self::assertFalse($client->ack($c), 'buried: no longer held');
        self::assertSame(0, $this->redis->zCard(self::key('mail', 'reserved')));
    }

    public function testReleaseByIdWithADelay(): void
    {
        $client = $this->topicClient();
        $client->pushTo('mail', 'a', 0);
        $this->moveTopic('mail', 1);
        $job = $client->reserve('mail', 600);
        self::assertTrue($client->release('a', 2, $job->receipt, null, 'mail'));
        $due = $this->redis->zScore(self::key('mail', 'pool'), 'a');
        self::assertLessThan($job->deadline, $due);
        self::assertEqualsWithDelta($this->redisTime() + 2, $due, 1);
    }

    public function testReserveManyAndAcksOfOtherTopics(): void
    {
        $client = $this->topicClient();
        $client->pushMany([[Message::create('m1', 'mail', ''), 0], [Message::create('m2', 'mail', ''), 0], [Message::create('s1', 'sms', ''), 0]]);
        $this->moveTopic('mail', 2);
        $this->moveTopic('sms', 1);

        [$acked, $mail] = $client->reserveMany('mail', 30, 5);
        self::assertSame([], $acked);
        self::assertSame(['m1', 'm2'], array_map(static fn ($j): string => $j->id, $mail));
        [, $sms] = $client->reserveMany('sms', 30, 1);

        // sms's call acks mail's jobs too (each on its own topic's keys), and ids of its own topic
        [$acked, $more] = $client->reserveMany('sms', 30, 1, [$mail[0], 's1', $mail[1], $mail[0]]);
        self::assertSame([true, true, true, false], $acked);
        self::assertSame([], $more);
        self::assertSame([], $this->jobKeys());
        self::assertCount(1, $sms);
    }

    public function testInspectAndStatsReadTheTopicsKeys(): void
    {
        $client = $this->topicClient();
        $client->pushTo('mail', 'w', 100, 'waiting');
        $client->pushTo('mail', 'r', 0, 'ready');
        $client->pushTo('mail', 'h', 0, 'held');
        $client->pushTo('sms', 'w', 50, 'other');
        $this->redis->zAdd(self::key('mail', 'pool'), 1, 'r', 2, 'h'); // r first out
        $this->moveTopic('mail', 2);
        $held = $client->reserve('mail', 60);
        self::assertSame('r', $held->id);

        $info = $client->job('mail', 'w');
        self::assertSame(['scheduled', 'mail', 7], [$info->state, $info->topic, $info->bodySize]);
        self::assertEqualsWithDelta($this->redis->zScore(self::key('mail', 'pool'), 'w'), $info->due, 0.001);
        self::assertSame('reserved', $client->job('mail', 'r')->state);
        self::assertSame('ready', $client->job('mail', 'h')->state);
        self::assertSame('scheduled', $client->job('sms', 'w')->state);
        self::assertSame('unknown', $client->job('sms', 'h')->state, 'ids are per topic');

        self::assertSame(['w'], array_map(static fn ($l): string => $l->id, $client->listScheduled('mail')->items));
        self::assertSame(['h'], $client->listReady('mail')->items);
        $reserved = $client->listReserved('mail')->items;
        self::assertSame('r', $reserved[0]->id);
        self::assertEqualsWithDelta($held->deadline, $reserved[0]->time, 0.001);

        self::assertSame([], $client->stats()->topics, 'stats reads the server\'s index of topics');
        $this->redis->sAdd(self::P . 'topics', 'mail', 'sms'); // as the server writes it from the announcements
        $stats = $client->stats();
        self::assertSame([2, 1], [$stats->scheduledTotal, $stats->reservedTotal]);
        self::assertSame(
            [['mail', 1, 1, 1, 0], ['sms', 1, 0, 0, 0]],
            array_map(static fn ($t): array => [$t->topic, $t->scheduled, $t->ready, $t->reserved, $t->dead], $stats->topics)
        );
    }

    public function testBracesAndMissingTopicsAreRefusedNamingTheLayout(): void
    {
        $client = $this->topicClient();
        $brace = 'topic "a{b}" may not contain "{" or "}" in the per-topic layout';
        $calls = [
            static fn (Client $c) => $c->pushTo('a{b}', 'i', 1),
            static fn (Client $c) => $c->push(Message::create('i', 'a{b}', 'x'), 1),
            static fn (Client $c) => $c->pushMany([[Message::create('i', 'ok', ''), 1], [Message::create('i', 'a{b}', ''), 1]]),
            static fn (Client $c) => $c->pop('a{b}'),
            static fn (Client $c) => $c->bPop('a{b}', 1),
            static fn (Client $c) => $c->reserve('a{b}', 1),
            static fn (Client $c) => $c->bReserve('a{b}', 1, 1),
            static fn (Client $c) => $c->reserveMany('a{b}', 1, 1),
            static fn (Client $c) => $c->remove('i', 'a{b}'),
            static fn (Client $c) => $c->reschedule('i', 1, 'a{b}'),
            static fn (Client $c) => $c->ack('i', null, 'a{b}'),
            static fn (Client $c) => $c->deadLetters('a{b}'),
            static fn (Client $c) => $c->requeueDead('a{b}'),
            static fn (Client $c) => $c->job('a{b}', 'i'),
            static fn (Client $c) => $c->listScheduled('a{b}'),
        ];
        foreach ($calls as $i => $call) {
            $this->assertRejectedBeforeRedis(static function (Client $c) use ($call, $brace, $i): void {
                try {
                    $call($c);
                } catch (InvalidArgumentException $e) {
                    self::assertStringContainsString($brace, $e->getMessage(), "call #{$i}");
                    throw $e;
                }
            }, $client);
        }
        $this->assertRejectedBeforeRedis(static fn (Client $c) => $c->pushTo('a}', 'i', 1), $client);

        $missing = [
            'remove() needs the topic in the per-topic layout: remove($id, $topic)' => static fn (Client $c) => $c->remove('i'),
            'reschedule() needs the topic in the per-topic layout: reschedule($id, $delay, $topic)' => static fn (Client $c) => $c->reschedule('i', 1),
            'ack() needs the topic in the per-topic layout: pass the ReservedMessage, or ack($id, ..., topic: $topic)' => static fn (Client $c) => $c->ack('i'),
            'touch() needs the topic' => static fn (Client $c) => $c->touch('i', 1),
            'bury() needs the topic' => static fn (Client $c) => $c->bury('i'),
        ];
        foreach ($missing as $message => $call) {
            $this->assertRejectedBeforeRedis(static function (Client $c) use ($call, $message): void {
                try {
                    $call($c);
                } catch (InvalidArgumentException $e) {
                    self::assertStringContainsString($message, $e->getMessage());
                    throw $e;
                }
            }, $client);
        }

        // the classic layout still takes braces, and ids alone
        $classic = $this->client();
        self::assertTrue($classic->pushTo('a{b}', 'i', 1));
        self::assertTrue($classic->remove('i'));
        self::assertTrue($classic->pushTo('a{b}', 'i', 1));
        self::assertTrue($classic->remove('i', 'a{b}'), 'a topic is taken (and not needed) in the classic layout');
    }

    public function testTheLayoutOptionAndThePrefixAreChecked(): void
    {
        foreach ([['layout' => 'columns'], ['layout' => 1], ['layout' => 'topic', 'prefix' => 'a{b}:']] as $bad) {
            try {
                $this->client($bad);
                self::fail('expected ConfigException for ' . json_encode($bad));
            } catch (ConfigException $e) {
                self::assertMatchesRegularExpression('/option (layout must be "classic" or "topic"|prefix: key prefix "a\{b\}:" may not contain "\{" or "\}" in the per-topic layout)/', $e->getMessage());
            }
        }
        self::assertSame('classic', $this->client(['prefix' => 'a{b}:'])->getKeys()->layout());
    }

    public function testTheConfigFileSelectsTheLayout(): void
    {
        $dir = sys_get_temp_dir() . '/delayer-php-topic-' . bin2hex(random_bytes(4));
        mkdir($dir, 0700);
        try {
            $port = RedisServer::shared()->port;
            file_put_contents("{$dir}/ok.conf", "[delayer]\nkey_prefix = cf:\nlayout = topic ; per topic\n\n[redis]\nhost = 127.0.0.1\nport = {$port}\n");
            $client = Client::fromConfig("{$dir}/ok.conf");
            self::assertSame(['cf:', 'topic'], [$client->getKeys()->prefix(), $client->getKeys()->layout()]);
            $client->pushTo('t', 'i', 5);
            self::assertSame(2, $this->redis->exists('cf:{t}:pool', 'cf:{t}:job:i'));

            file_put_contents("{$dir}/classic.conf", "[delayer]\nlayout = classic\n[redis]\nport = {$port}\n");
            self::assertSame('classic', Client::fromConfig("{$dir}/classic.conf")->getKeys()->layout());

            $refused = [
                "[delayer]\nkey_prefix = x:\nlayout = columns\n" => ':3: [delayer] layout: "columns" is not one of classic, topic',
                "[delayer]\nlayout = topic\nkey_prefix = a{b}:\n" => ':3: [delayer] key_prefix: key_prefix "a{b}:" contains a brace, which the per-topic layout cannot use',
            ];
            foreach ($refused as $text => $message) {
                file_put_contents("{$dir}/bad.conf", $text . "[redis]\nport = {$port}\n");
                try {
                    Client::fromConfig("{$dir}/bad.conf");
                    self::fail("expected ConfigException for {$text}");
                } catch (ConfigException $e) {
                    self::assertSame("{$dir}/bad.conf{$message}", $e->getMessage());
                }
            }
        } finally {
            array_map('unlink', glob("{$dir}/*") ?: []);
            rmdir($dir);
        }
    }

    public function testAWorkerRunsTopicsOnTheirOwnKeys(): void
    {
        $client = $this->topicClient();
        $client->pushMany([[Message::create('1', 'mail', ''), 0], [Message::create('1', 'sms', ''), 0], [Message::create('2', 'mail', ''), 0]]);
        $this->moveTopic('mail', 2);
        $this->moveTopic('sms', 1);
        $worker = new Worker($client, ttr: 30, idleWait: 0.05, autoTouch: false, signals: false, logger: static fn () => null);
        $ran = [];
        $handler = static function (Job $job) use (&$ran, &$worker): void {
            $ran[] = "{$job->topic}/{$job->id}";
            if (\count($ran) === 3) {
                $worker->stop();
            }
        };
        $acked = [];
        $worker->handle('mail', $handler)->handle('sms', $handler)->on(static function (string $event, array $data) use (&$acked): void {
            if ($event === 'acked') {
                $acked[] = "{$data['topic']}/{$data['id']}";
            }
        });
        $worker->run();
        sort($ran);
        sort($acked);
        self::assertSame(['mail/1', 'mail/2', 'sms/1'], $ran);
        self::assertSame($ran, $acked, 'every job acked on its own topic');
        self::assertSame([], $this->jobKeys());
    }

    /** The keys of the topics that hold jobs (the receipt counters left aside). */
    private function jobKeys(): array
    {
        return array_values(array_filter($this->redis->keys(self::P . '{*'), static fn (string $k): bool => !str_ends_with($k, ':receipt_seq') && !str_ends_with($k, ':outcomes')));
    }
}
