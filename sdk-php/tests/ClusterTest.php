<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Backoff;
use Delayer\Client;
use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\IdTakenException;
use Delayer\Job;
use Delayer\Message;
use Delayer\ReservedMessage;
use Delayer\Worker;
use PHPUnit\Framework\TestCase;

/**
 * Redis Cluster (issue 12, `[redis] mode = cluster`, option `cluster`): the
 * config rule as the server's, and every operation on a real cluster of 3
 * masters and 3 replicas (testkit/cluster.py, run as a program, with a
 * password) with topics spread over all masters, ending with a master
 * killed (SIGKILL) and its replica taking over. The tests play the server
 * with the repository's lua/move_topic.lua, sent to the topic's node.
 *
 * One cluster for the class (forming one takes seconds); each test has its
 * own prefix. The failover test is last: it leaves a master without replica.
 */
final class ClusterTest extends TestCase
{
    private const PASSWORD = 'cluster-pw';

    /** @var resource|null the cluster.py process */
    private static $kit = null;
    /** @var array<int, resource> its stdin and stdout */
    private static array $pipes = [];
    private static string $dir = '';
    /** @var array{nodes: string, ports: list<int>, masters: list<int>}|null */
    private static ?array $started = null;

    private string $prefix = '';
    private ?\RedisCluster $raw = null;
    /** @var resource|null the delayer server */
    private $server = null;

    public static function tearDownAfterClass(): void
    {
        if (self::$kit !== null) {
            @fwrite(self::$pipes[0], "stop\n");
            fclose(self::$pipes[0]);
            fclose(self::$pipes[1]);
            proc_close(self::$kit);
            self::$kit = null;
        }
        if (self::$dir !== '') {
            exec('rm -rf ' . escapeshellarg(self::$dir));
        }
    }

    protected function tearDown(): void
    {
        $this->raw?->close();
        if ($this->server !== null) {
            proc_terminate($this->server, 9);
            proc_close($this->server);
        }
    }

    /** @return array{nodes: string, ports: list<int>, masters: list<int>} */
    private static function cluster(): array
    {
        if (self::$started !== null) {
            return self::$started;
        }
        self::$dir = sys_get_temp_dir() . '/delayer-php-cluster-' . getmypid() . '-' . bin2hex(random_bytes(3));
        @mkdir(self::$dir);
        $root = \dirname(__DIR__, 2);
        // The repository's .venv has redis-py (tools/install-deps.sh), which cluster.py uses.
        $python = getenv('DELAYER_PYTHON') ?: (is_file("{$root}/.venv/bin/python") ? "{$root}/.venv/bin/python" : 'python3');
        self::$kit = proc_open([$python, "{$root}/testkit/cluster.py", self::$dir],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', self::$dir . '/kit.log', 'a']],
            self::$pipes, null, ['CLUSTER_REDIS_PASSWORD' => self::PASSWORD] + getenv());
        self::assertIsResource(self::$kit);
        $started = json_decode((string) fgets(self::$pipes[1]), true);
        self::assertIsArray($started, 'cluster.py did not start: ' . @file_get_contents(self::$dir . '/kit.log'));
        self::assertCount(3, $started['masters']);
        return self::$started = $started;
    }

    /** @param array<string, mixed> $options */
    private function client(array $options = []): Client
    {
        $this->prefix = $this->prefix ?: 'ct' . bin2hex(random_bytes(3)) . ':';
        return new Client($options + [
            'cluster' => explode(',', self::cluster()['nodes']),
            'password' => self::PASSWORD,
            'prefix' => $this->prefix,
            'timeout' => 2,
        ]);
    }

    /** A RedisCluster of the test's own, to look at what the client wrote. */
    /** Adds topics to `<prefix>topics`, as the server does when it hears their announcements (stats() lists them). */
    private function serverHeard(string ...$topics): void
    {
        $this->raw()->sAdd($this->prefix . 'topics', ...$topics);
    }

    private function raw(): \RedisCluster
    {
        return $this->raw ??= new \RedisCluster(null, explode(',', self::cluster()['nodes']), 5, 5, false, self::PASSWORD);
    }

    private function key(string $topic, string $kind): string
    {
        return $this->prefix . '{' . $topic . '}:' . $kind;
    }

    /** The port of the master serving $key's slot (CLUSTER KEYSLOT, CLUSTER SLOTS). */
    private function masterFor(string $key): int
    {
        $slot = (int) $this->raw()->rawCommand($key, 'CLUSTER', 'KEYSLOT', $key);
        foreach ($this->raw()->rawCommand($key, 'CLUSTER', 'SLOTS') as $range) {
            if ($slot >= $range[0] && $slot <= $range[1]) {
                return (int) $range[2][1];
            }
        }
        self::fail("no master serves slot {$slot}");
    }

    /** @return list<int> the ports of the masters serving slots now, sorted */
    private function masters(): array
    {
        $ports = array_map(static fn (array $range): int => (int) $range[2][1], $this->raw()->rawCommand('x', 'CLUSTER', 'SLOTS'));
        $ports = array_values(array_unique($ports));
        sort($ports);
        return $ports;
    }

    /**
     * A topic "<stem><n>" served by a master that has a live replica (a
     * failover needs one: an earlier test's failover leaves a master without).
     */
    private function topicWithAReplica(string $stem): string
    {
        $nodes = array_map(static fn (string $line): array => explode(' ', $line), array_filter(explode("\n", (string) $this->raw()->rawCommand('x', 'CLUSTER', 'NODES'))));
        $covered = [];
        foreach ($nodes as $n) {
            if (str_contains($n[2], 'slave') && !str_contains($n[2], 'fail')) {
                $covered[$n[3]] = true;
            }
        }
        $ports = [];
        foreach ($nodes as $n) {
            if (str_contains($n[2], 'master') && isset($covered[$n[0]])) {
                $ports[] = (int) substr($n[1], strrpos($n[1], ':') + 1, strcspn(substr($n[1], strrpos($n[1], ':') + 1), '@'));
            }
        }
        self::assertNotSame([], $ports, 'a master with a live replica');
        for ($n = 0; $n < 1000; $n++) {
            if (\in_array($this->masterFor($this->key("{$stem}{$n}", 'pool')), $ports, true)) {
                return "{$stem}{$n}";
            }
        }
        self::fail('no topic on a master with a replica');
    }

    /** Kills the master serving $key and waits for its replica to take over (cluster.py). */
    private function killMasterOf(string $key): void
    {
        $old = $this->masterFor($key);
        fwrite(self::$pipes[0], "kill-master {$key}\n");
        $moved = json_decode((string) fgets(self::$pipes[1]), true);
        self::assertIsArray($moved);
        self::assertArrayNotHasKey('error', $moved);
        self::assertSame($old, $moved['killed']);
        $this->raw?->close();
        $this->raw = null;
        self::assertSame($moved['master'], $this->masterFor($key), 'the replica serves the key now');
    }

    /**
     * Topics named "<stem><n>", at least one on each master.
     *
     * @return array<int, string> master port => a topic it serves
     */
    private function topicPerMaster(string $stem): array
    {
        $found = [];
        for ($n = 0; \count($found) < 3; $n++) {
            self::assertLessThan(1000, $n, 'no topic spread over all masters');
            $found[$this->masterFor($this->key("{$stem}{$n}", 'pool'))] ??= "{$stem}{$n}";
        }
        ksort($found);
        $masters = $this->masters();
        self::assertSame($masters, array_keys($found));
        return $found;
    }

    /** Runs lua/move_topic.lua on $topic's node until $expected ids were moved, or fails. */
    private function moveTopic(string $topic, int $expected, float $deadline = 15.0): void
    {
        $source = (string) file_get_contents(\dirname(__DIR__, 2) . '/lua/move_topic.lua');
        $until = microtime(true) + $deadline;
        $taken = 0;
        while (true) {
            $r = $this->raw()->eval($source, [$this->key($topic, 'pool'), $this->key($topic, 'ready'), $this->key($topic, 'reserved'), $this->key($topic, 'flow'), '1000'], 4);
            self::assertIsArray($r, 'move_topic.lua failed: ' . $this->raw()->getLastError());
            $taken += (int) $r[0];
            if ($taken >= $expected) {
                self::assertSame($expected, $taken, 'move_topic.lua moved more ids than expected');
                return;
            }
            self::assertLessThan($until, microtime(true), "move_topic.lua moved {$taken} of {$expected} ids within {$deadline} s");
            usleep(5000);
        }
    }

    /** @return iterable<string, array{0: string, 1: string}> */
    public static function badFiles(): iterable
    {
        $ok = "[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\nnodes = 127.0.0.1:7000\n";
        yield 'classic layout' => ["[redis]\nmode = cluster\nnodes = 127.0.0.1:7000\n",
            ':2: [redis] mode: mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)'];
        yield 'no nodes' => ["[delayer]\nlayout = topic\n[redis]\nmode = cluster\n",
            ':4: [redis] mode: mode = cluster needs nodes (seed nodes: host:port,host:port,...)'];
        yield 'a host' => [$ok . "host = 127.0.0.1\n", ':7: [redis] host: not used with mode = cluster: the nodes name the cluster'];
        yield 'a url' => [$ok . "url = redis://127.0.0.1:7000\n", ':7: [redis] url: not used with mode = cluster: the nodes name the cluster'];
        yield 'a port' => [$ok . "port = 7000\n", ':7: [redis] port: not used with mode = cluster: the nodes name the cluster'];
        yield 'a master name' => [$ok . "master_name = m\n", ':7: [redis] master_name: not used with mode = cluster: the nodes name the cluster'];
        yield 'database 1' => [$ok . "database = 1\n", ':7: [redis] database: Redis Cluster has only database 0'];
        yield 'a bad node' => [$ok . "\n", ''];
        yield 'bad tls' => [$ok . "tls = maybe\n", ':7: [redis] tls: "maybe" is not yes or no'];
        yield 'not a mode' => ["[redis]\nmode = clustre\n", ':2: [redis] mode: "clustre" is not a mode: standalone, sentinel or cluster'];
    }

    /** @dataProvider badFiles */
    public function testModeClusterIsReadAsTheServerReadsIt(string $text, string $message): void
    {
        if ($message === '') { // the bad node: nodes on line 6
            $text = "[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\nnodes = 127.0.0.1:7000,node-2\n";
            $message = ':6: [redis] nodes: "node-2" is not host:port';
        }
        $path = tempnam(sys_get_temp_dir(), 'delayer-conf-');
        file_put_contents($path, $text);
        try {
            Client::fromConfig($path);
            self::fail('accepted');
        } catch (ConfigException $e) {
            self::assertSame($path . $message, $e->getMessage());
        } finally {
            unlink($path);
        }
    }

    public function testAClusterFileGivesTheClusterOptions(): void
    {
        $path = tempnam(sys_get_temp_dir(), 'delayer-conf-');
        file_put_contents($path, "[delayer]\nlayout = topic\nkey_prefix = app:\n\n[redis]\nmode = cluster\n"
            . "nodes = 127.0.0.1:7000, [::1]:7001\ndatabase = 0\npassword = pw\ntls = yes\n");
        try {
            self::assertSame(
                ['cluster' => ['127.0.0.1:7000', '[::1]:7001'], 'cluster_tls' => true, 'database' => 0, 'password' => 'pw', 'prefix' => 'app:', 'layout' => 'topic'],
                \Delayer\ConfigFile::load($path)
            );
        } finally {
            unlink($path);
        }
    }

    /** @return iterable<string, array{0: array<string, mixed>, 1: string}> */
    public static function badOptions(): iterable
    {
        $seeds = ['cluster' => ['127.0.0.1:7000']];
        yield 'classic' => [$seeds + ['layout' => 'classic'], 'option layout: the cluster option needs the per-topic layout ("topic"; the classic layout keeps every job in one key)'];
        yield 'database' => [$seeds + ['database' => 2], 'option database: Redis Cluster has only database 0'];
        yield 'host' => [$seeds + ['host' => 'h'], 'option host: not used with cluster (the cluster option names the nodes)'];
        yield 'sentinels' => [$seeds + ['sentinels' => 'h:1'], 'option sentinels: not used with cluster (the cluster option names the nodes)'];
        yield 'bad seed' => [['cluster' => ['127.0.0.1']], 'option cluster: "127.0.0.1" is not host:port'];
        yield 'no seed' => [['cluster' => []], 'option cluster: must be "host:port,..." or a list of "host:port"'];
        yield 'tls alone' => [['host' => 'h', 'cluster_tls' => true], 'option cluster_tls goes with the cluster option'];
    }

    /**
     * @dataProvider badOptions
     * @param array<string, mixed> $options
     */
    public function testTheClusterOptionIsChecked(array $options, string $message): void
    {
        try {
            new Client($options);
            self::fail('accepted');
        } catch (ConfigException $e) {
            self::assertSame($message, $e->getMessage());
        }
    }

    public function testAWrongPasswordIsAConnectionErrorWithoutThePassword(): void
    {
        try {
            $this->client(['password' => 'not-the-pw-42']);
            self::fail('connected');
        } catch (ConnectionException $e) {
            self::assertStringContainsString('cannot connect to the Redis Cluster at 127.0.0.1:', $e->getMessage());
            self::assertStringNotContainsString('not-the-pw-42', $e->getMessage());
            self::assertStringNotContainsString('not-the-pw-42', (string) $e);
        }
    }

    public function testEveryOperationOnThreeMasters(): void
    {
        $client = $this->client();
        $topics = $this->topicPerMaster('t');
        self::assertCount(3, array_unique(array_keys($topics)), 'one topic on each master');

        foreach ($topics as $topic) {
            // push, then ids per topic: the same id is another job on another topic
            self::assertTrue($client->pushTo($topic, 'a', 0, "A of {$topic}"));
            self::assertTrue($client->schedule(Message::create('b', $topic, 'B')->withMaxAttempts(1), 0));
            self::assertTrue($client->pushTo($topic, 'later', 600));
            try {
                $client->pushTo($topic, 'a', 0, 'again', ifAbsent: true);
                self::fail('the id is taken');
            } catch (IdTakenException $e) {
                self::assertSame('a', $e->taken[0]->id);
            }
            self::assertIsFloat($client->reschedule('later', 900, $topic));
            self::assertTrue($client->remove('later', $topic));
            self::assertFalse($client->remove('later', $topic));
            // no index write: the server keeps the index from the scripts' announcements
            self::assertFalse($this->raw()->zScore($this->prefix . 'due', $topic));
        }
        foreach ($topics as $topic) {
            $this->moveTopic($topic, 2);
            $a = $client->pop($topic);
            self::assertSame(['a', "A of {$topic}"], [$a->getId(), $a->getBody()]);
            $b = $client->bReserve($topic, 30, 5);
            self::assertInstanceOf(ReservedMessage::class, $b);
            self::assertSame('b', $b->id);
            self::assertIsFloat($client->touch($b, 60));
            self::assertSame('reserved', $client->job($topic, 'b')->state);
            self::assertSame('b', $client->listReserved($topic)->items[0]->id);
            self::assertTrue($client->release($b, null, null, 'boom'), 'out of attempts: dead');
            self::assertSame(['b'], array_map(static fn ($d): string => $d->id, $client->deadLetters($topic)));
            self::assertSame(1, $client->requeueDead($topic));
            $this->moveTopic($topic, 1);
            self::assertSame(['b'], $client->listReady($topic)->items);
            $again = $client->reserve($topic, 30);
            self::assertTrue($client->bury($again, null, 'given up'));
            self::assertSame(1, $client->purgeDead($topic));
            self::assertFalse($client->bPop($topic, 0.05));
        }

        // reserveMany acks jobs of the other topics, each on its own master
        $all = array_values($topics);
        foreach ($all as $topic) {
            $client->pushTo($topic, 'r', 0);
            $this->moveTopic($topic, 1);
        }
        [, $first] = $client->reserveMany($all[0], 30, 5);
        [, $second] = $client->reserveMany($all[1], 30, 5);
        [$acked, $third] = $client->reserveMany($all[2], 30, 5, [$first[0], $second[0]]);
        self::assertSame([true, true], $acked);
        self::assertTrue($client->ack($third[0]));

        $this->serverHeard(...$all);
        $stats = $client->stats();
        self::assertSame([0, 0], [$stats->scheduledTotal, $stats->reservedTotal]);
        sort($all);
        self::assertSame($all, array_map(static fn ($t): string => $t->topic, $stats->topics));
        self::assertSame([], $this->raw()->keys($this->prefix . '{*:job:*'), 'every job gone');
    }

    public function testPushManyOverManyTopicsReachesEveryMaster(): void
    {
        $client = $this->client(['durable' => 5.0]);
        $jobs = [];
        for ($i = 0; $i < 600; $i++) {
            $jobs[] = [Message::create("id{$i}", 'many' . ($i % 40), "body {$i}"), 0];
        }
        self::assertSame(600, $client->pushMany($jobs));
        $this->serverHeard(...array_map(static fn (int $i): string => "many{$i}", range(0, 39)));
        $masters = [];
        $stats = $client->stats();
        self::assertSame(600, $stats->scheduledTotal);
        self::assertCount(40, $stats->topics);
        foreach ($stats->topics as $t) {
            self::assertSame(15, $t->scheduled, $t->topic);
            $masters[$this->masterFor($this->key($t->topic, 'pool'))] = true;
        }
        self::assertCount(3, $masters, 'the topics are spread over the three masters');
        try {
            $client->pushMany([[Message::create('id1', 'many1', 'again'), 0], [Message::create('new', 'many1', ''), 0]], ifAbsent: true);
            self::fail('id1 is taken');
        } catch (IdTakenException $e) {
            self::assertSame(['id1'], array_map(static fn ($t): string => $t->id, $e->taken));
        }
        self::assertSame(16, $client->stats()->topics[array_search('many1', array_map(static fn ($t): string => $t->topic, $stats->topics), true)]->scheduled);
    }

    public function testAScriptANodeDoesNotKnowIsLoadedThere(): void
    {
        $client = $this->client();
        $topics = $this->topicPerMaster('ns');
        foreach ($topics as $topic) {
            $client->pushTo($topic, 'x', 0);
        }
        foreach ($this->masters() as $port) {
            self::assertTrue($this->raw()->script(['127.0.0.1', $port], 'flush'));
        }
        foreach ($topics as $topic) {
            self::assertTrue($client->pushTo($topic, 'y', 0), 'NOSCRIPT: loaded on the node, then run');
            self::assertSame('scheduled', $client->job($topic, 'y')->state);
        }
    }

    public function testTheSlotOfAKeyIsTheClusters(): void
    {
        foreach (['foo', '{user1000}.following', 'a{}b', 'x{}{y}', $this->key('été', 'pool'), $this->key('t1', 'job:42')] as $key) {
            self::assertSame((int) $this->raw()->rawCommand('x', 'CLUSTER', 'KEYSLOT', $key), \Delayer\ClusterConnection::slot($key), $key);
        }
    }

    /** A plain connection to one node (password given). */
    private static function nodeAt(int $port): \Redis
    {
        $redis = new \Redis();
        self::assertTrue($redis->connect('127.0.0.1', $port, 5));
        self::assertTrue($redis->auth(self::PASSWORD));
        return $redis;
    }

    public function testAClientFollowsATopicResharded(): void
    {
        $client = $this->client();
        $topic = 'moving';
        $pool = $this->key($topic, 'pool');
        $client->pushTo($topic, 'a', 0, 'A');
        $client->pushTo($topic, 'b', 60, 'B');
        $this->serverHeard($topic);
        $slot = (int) $this->raw()->rawCommand($pool, 'CLUSTER', 'KEYSLOT', $pool);
        $from = $this->masterFor($pool);
        $to = current(array_diff($this->masters(), [$from]));
        $src = self::nodeAt($from);
        $dst = self::nodeAt($to);
        $srcId = $src->rawCommand('CLUSTER', 'MYID');
        $dstId = $dst->rawCommand('CLUSTER', 'MYID');
        // redis-cli --cluster reshard's steps for one slot
        self::assertTrue($dst->rawCommand('CLUSTER', 'SETSLOT', (string) $slot, 'IMPORTING', $srcId));
        self::assertTrue($src->rawCommand('CLUSTER', 'SETSLOT', (string) $slot, 'MIGRATING', $dstId));
        $keys = $src->rawCommand('CLUSTER', 'GETKEYSINSLOT', (string) $slot, '1000');
        self::assertNotEmpty($keys);
        self::assertTrue($src->rawCommand('MIGRATE', '127.0.0.1', (string) $to, '', '0', '10000', 'AUTH', self::PASSWORD, 'KEYS', ...$keys));
        // Mid-migration the old master answers ASK for the keys it no longer has: ASKING, then the new one answers.
        $stats = $client->stats();
        self::assertSame([[$topic, 2]], array_map(static fn ($t): array => [$t->topic, $t->scheduled], $stats->topics));
        foreach ($this->masters() as $port) {
            self::assertTrue(self::nodeAt($port)->rawCommand('CLUSTER', 'SETSLOT', (string) $slot, 'NODE', $dstId));
        }
        $this->raw?->close();
        $this->raw = null;

        // The client's map still names the old master: it answers MOVED, which the client follows.
        self::assertTrue($client->pushTo($topic, 'c', 0, 'C'));
        self::assertSame($to, $this->masterFor($pool));
        self::assertSame('scheduled', $client->job($topic, 'b')->state);
        $this->moveTopic($topic, 2);
        self::assertSame(['a', 'c'], [$client->pop($topic)->getId(), $client->bPop($topic, 2)->getId()]);
        self::assertSame(1, $client->stats()->scheduledTotal);
        self::assertSame(0, $src->rawCommand('CLUSTER', 'COUNTKEYSINSLOT', (string) $slot), 'nothing written on the old master');
    }

    public function testBlockingWaitsOutlastTheReadTimeout(): void
    {
        $client = $this->client(['timeout' => 0.5]);
        $began = microtime(true);
        self::assertFalse($client->bPop('slow', 1.5));
        self::assertFalse($client->bReserve('slow', 10, 1.2));
        self::assertGreaterThanOrEqual(2.6, microtime(true) - $began, 'both waited their whole timeout');
        $client->pushTo('slow', 'j', 0);
        $this->moveTopic('slow', 1);
        self::assertSame('j', $client->bPop('slow', 5)->getId());
    }

    /** pause() / resume() on every master; a paused topic's wait blocks on its gate, in the topic's slot, as long as asked (issue 23). */
    public function testAPausedTopicWaitsOnItsGate(): void
    {
        $client = $this->client(['timeout' => 0.5]);
        foreach ($this->topicPerMaster('p') as $topic) {
            $client->pushTo($topic, 'j', 0);
            $this->moveTopic($topic, 1);
            self::assertTrue($client->pause($topic), 'one EVALSHA: the topic\'s three keys share its slot');
            self::assertTrue($client->isPaused($topic));
            self::assertTrue($this->raw()->hExists($this->key($topic, 'flow'), 'paused'), 'written in the topic\'s slot');
            $began = microtime(true);
            self::assertFalse($client->bPop($topic, 1.2));
            self::assertGreaterThanOrEqual(1.2, microtime(true) - $began);
            self::assertSame(['j'], $this->raw()->lRange($this->key($topic, 'ready'), 0, -1));
            $client->pushTo($topic, 'due', 0);
            self::assertSame(1, $client->flow($topic)->held, 'the due job in the topic\'s pool');
            self::assertTrue($client->resume($topic));
            self::assertFalse($client->resume($topic));
            self::assertSame('j', $client->bReserve($topic, 30, 1)->id);
        }
    }

    public function testAWorkerRunsTopicsOnEveryMaster(): void
    {
        $client = $this->client();
        $topics = array_values($this->topicPerMaster('w'));
        foreach ($topics as $topic) {
            $client->pushTo($topic, '1', 0);
            $client->pushTo($topic, '2', 0);
            $this->moveTopic($topic, 2);
        }
        $worker = new Worker($client, ttr: 30, idleWait: 0.05, autoTouch: false, signals: false, logger: static fn () => null);
        $ran = [];
        $handler = static function (Job $job) use (&$ran, &$worker): void {
            $ran[] = "{$job->topic}/{$job->id}";
            if (\count($ran) === 6) {
                $worker->stop();
            }
        };
        foreach ($topics as $topic) {
            $worker->handle($topic, $handler);
        }
        $worker->run();
        sort($ran);
        $want = [];
        foreach ($topics as $topic) {
            array_push($want, "{$topic}/1", "{$topic}/2");
        }
        sort($want);
        self::assertSame($want, $ran);
        self::assertSame(0, $client->stats()->reservedTotal, 'every job acked');
    }

    public function testTheRealServerMovesAndExpiresJobsOnEveryMaster(): void
    {
        $client = $this->client();
        $topics = array_values($this->topicPerMaster('srv'));
        $conf = self::$dir . '/delayer-' . bin2hex(random_bytes(3)) . '.conf';
        file_put_contents($conf, "[delayer]\nlayout = topic\nkey_prefix = {$this->prefix}\ntimer_interval = 50\n\n"
            . "[redis]\nmode = cluster\nnodes = " . self::cluster()['nodes'] . "\npassword = " . self::PASSWORD . "\n");
        $this->startServer($conf);
        foreach ($topics as $topic) {
            $client->pushTo($topic, 'now', 0, "now on {$topic}");
            $client->pushTo($topic, 'soon', 1.5, "soon on {$topic}");
        }
        $pushed = microtime(true);
        foreach ($topics as $topic) {
            $now = $client->bPop($topic, 30);
            self::assertInstanceOf(Message::class, $now, "the server moved {$topic}'s job");
            self::assertSame("now on {$topic}", $now->getBody());
        }
        foreach ($topics as $topic) {
            $soon = $client->bReserve($topic, 1, 30);
            self::assertInstanceOf(ReservedMessage::class, $soon);
            self::assertSame(['soon', 1], [$soon->id, $soon->attempts]);
            self::assertGreaterThanOrEqual(1.4, microtime(true) - $pushed, 'not moved before its due time');
        }
        // not acked within its 1 s ttr: the server expires the reservation and delivers it again
        foreach ($topics as $topic) {
            $again = $client->bReserve($topic, 30, 30);
            self::assertInstanceOf(ReservedMessage::class, $again, "{$topic}'s expired reservation came back");
            self::assertSame(['soon', 2], [$again->id, $again->attempts]);
            self::assertTrue($client->ack($again));
        }
        self::assertSame([0, 0], [$client->stats()->scheduledTotal, $client->stats()->reservedTotal]);
        self::assertTrue(proc_get_status($this->server)['running'], 'the server kept running');
        self::assertStringNotContainsString(self::PASSWORD, (string) file_get_contents("{$conf}.log"));
    }

    private function startServer(string $conf): void
    {
        $root = \dirname(__DIR__, 2);
        $binary = getenv('DELAYER_BIN') ?: "{$root}/target/debug/delayer";
        if (!is_file($binary)) {
            exec('cargo build -q -j 2 -p delayer-server --manifest-path ' . escapeshellarg("{$root}/Cargo.toml") . ' 2>&1', $out, $code);
            self::assertSame(0, $code, "cargo build -p delayer-server failed:\n" . implode("\n", $out));
        }
        $this->server = proc_open([$binary, '-c', $conf],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$conf}.log", 'w'], 2 => ['file', "{$conf}.log", 'a']],
            $pipes, self::$dir);
        self::assertIsResource($this->server);
    }

    /** Last two: each leaves a master without replica. */
    public function testAWorkerGoesOnThroughAFailover(): void
    {
        $client = $this->client();
        $topic = $this->topicWithAReplica('wf');
        $ids = array_map('strval', range(1, 6));
        foreach ($ids as $id) {
            $client->pushTo($topic, $id, 0);
        }
        $this->moveTopic($topic, 6);
        // the jobs (moved by our own connection) on the replica before the kill
        self::assertSame(1, $this->raw()->rawCommand($this->key($topic, 'pool'), 'WAIT', '1', '10000'));
        $worker = new Worker($client, ttr: 60, idleWait: 0.05, reconnectMin: 0.05, reconnectMax: 0.5, autoTouch: false, signals: false, logger: static fn () => null);
        $ran = [];
        $killed = false;
        $handler = function (Job $job) use (&$ran, &$worker, &$killed, $topic, $ids): void {
            $ran[] = $job->id;
            if (!$killed) {
                $killed = true;
                $this->killMasterOf($this->key($topic, 'pool')); // mid-job: the ack meets the failover
            }
            if (array_diff($ids, $ran) === []) {
                $worker->stop();
            }
        };
        $worker->handle($topic, $handler);
        // A deadline (the worker runs without signals of its own): the assertion below says what is missing.
        pcntl_async_signals(true);
        pcntl_signal(SIGALRM, static function () use (&$worker): void {
            $worker->stop();
        });
        pcntl_alarm(120);
        try {
            $worker->run();
        } finally {
            pcntl_alarm(0);
            pcntl_signal(SIGALRM, SIG_DFL);
        }
        self::assertTrue($killed);
        $done = array_values(array_unique($ran));
        sort($done);
        self::assertSame($ids, $done, 'every job ran (the first one may run twice: at least once)');
    }

    public function testCallsWorkAgainAfterAMasterIsKilled(): void
    {
        $client = $this->client();
        $topic = $this->topicWithAReplica('failover');
        $pool = $this->key($topic, 'pool');
        $client->pushTo($topic, 'before', 0, 'b');
        $this->moveTopic($topic, 1);
        self::assertSame('before', $client->reserve($topic, 60)->id);
        $old = $this->masterFor($pool);
        // A write of ours on that node once a replica has it: so has the reservation before it.
        $this->raw()->rawCommand($pool, 'SET', $this->key($topic, 'marker'), '1');
        self::assertSame(1, $this->raw()->rawCommand($pool, 'WAIT', '1', '10000'), 'the replica caught up');

        $this->killMasterOf($pool);

        // The first calls may meet the dead master (ConnectionException); then they work again.
        $this->eventually(fn () => $client->pushTo($topic, 'after', 0, 'a'));
        $this->moveTopic($topic, 1);
        $job = $this->eventually(fn () => $client->bReserve($topic, 60, 2));
        self::assertSame('after', $job->id);
        self::assertTrue($client->ack($job));
        self::assertSame(['before'], array_map(static fn ($l): string => $l->id, $client->listReserved($topic)->items), '"before" survived the failover, still reserved');
        self::assertTrue($client->ack('before', null, $topic));
    }

    /**
     * @template T
     * @param \Closure(): T $call
     * @return T
     */
    private function eventually(\Closure $call): mixed
    {
        $until = microtime(true) + 60;
        $last = null;
        while (microtime(true) < $until) {
            try {
                $got = $call();
                if ($got !== false && $got !== null) {
                    return $got;
                }
            } catch (ConnectionException $e) {
                $last = $e->getMessage();
                self::assertStringNotContainsString(self::PASSWORD, $last);
            }
            usleep(50000);
        }
        self::fail('never happened; last error: ' . var_export($last, true));
    }
}
