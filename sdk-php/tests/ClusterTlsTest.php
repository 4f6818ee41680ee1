<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Client;
use Delayer\Exception\ConnectionException;
use PHPUnit\Framework\TestCase;

/**
 * Redis Cluster over TLS with an ACL user: three TLS-only masters (no
 * replicas; the failover is ClusterTest's) started here, joined by
 * `redis-cli --tls --cluster create`, read from a delayer.conf with
 * `mode = cluster`, `tls = yes`, `tls_ca_file`, `username`, `password`.
 * testkit/cluster.py has no TLS, hence nodes of its own.
 */
final class ClusterTlsTest extends TestCase
{
    private const USER = 'delayer';
    private const PASSWORD = 'acl-cluster-pw';

    /** @var list<resource> */
    private static array $nodes = [];
    /** @var list<int> */
    private static array $ports = [];
    private static string $dir = '';
    /** @var array{cert: string, key: string, ca: string} */
    private static array $certs;

    public static function setUpBeforeClass(): void
    {
        self::$dir = sys_get_temp_dir() . '/delayer-php-cluster-tls-' . getmypid() . '-' . bin2hex(random_bytes(3));
        mkdir(self::$dir);
        self::$certs = RedisServer::makeCertificates(self::$dir);
        for ($i = 0; $i < 3; $i++) {
            self::$ports[] = $port = self::clusterPort();
            $node = proc_open([RedisServer::BINARY, '--port', '0', '--tls-port', (string) $port, '--bind', '127.0.0.1',
                '--tls-cert-file', self::$certs['cert'], '--tls-key-file', self::$certs['key'], '--tls-ca-cert-file', self::$certs['ca'],
                '--tls-auth-clients', 'no', '--tls-cluster', 'yes', '--tls-replication', 'yes',
                '--cluster-enabled', 'yes', '--cluster-config-file', "nodes-{$port}.conf", '--cluster-node-timeout', '2000',
                '--save', '', '--appendonly', 'no', '--dir', self::$dir, '--logfile', "node-{$port}.log",
                '--user', 'default', 'on', 'nopass', '~*', '&*', '+@all',
                '--user', self::USER, 'on', '>' . self::PASSWORD, '~*', '&*', '+@all'],
                [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, self::$dir);
            self::assertIsResource($node);
            self::$nodes[] = $node;
        }
        self::waitUntil(static fn (): bool => array_product(array_map(self::answers(...), self::$ports)) === 1, 'the nodes answer');
        $nodes = array_map(static fn (int $p): string => "127.0.0.1:{$p}", self::$ports);
        exec(implode(' ', array_map('escapeshellarg', ['redis-cli', '--tls', '--cacert', self::$certs['ca'], '--cluster', 'create',
            ...$nodes, '--cluster-replicas', '0', '--cluster-yes'])) . ' 2>&1', $out, $code);
        self::assertSame(0, $code, "redis-cli --cluster create failed:\n" . implode("\n", $out));
        self::waitUntil(static function (): bool {
            foreach (self::$ports as $port) {
                if (!str_contains((string) self::node($port)?->rawCommand('CLUSTER', 'INFO'), 'cluster_state:ok')) {
                    return false;
                }
            }
            return true;
        }, 'the cluster is ok on every node');
    }

    public static function tearDownAfterClass(): void
    {
        foreach (self::$nodes as $node) {
            proc_terminate($node, 9);
            proc_close($node);
        }
        self::$nodes = [];
        if (self::$dir !== '') {
            exec('rm -rf ' . escapeshellarg(self::$dir));
        }
    }

    public function testAClientFromAClusterFileSpeaksTlsAsAnAclUser(): void
    {
        $client = Client::fromConfig($this->conf());
        $topics = array_map(static fn (int $i): string => "tls{$i}", range(1, 12));
        foreach ($topics as $topic) {
            self::assertTrue($client->pushTo($topic, 'a', 0, 'over tls'));
        }
        foreach ($topics as $topic) { // lookup.lua on each topic's node
            self::assertSame('scheduled', $client->job($topic, 'a')->state, $topic);
        }
        self::assertFalse($client->bPop('tls1', 0.05), 'not moved: nothing ready');
        self::assertTrue($client->remove('a', 'tls1'));
    }

    public function testAWrongPasswordSaysSoWithoutThePassword(): void
    {
        try {
            Client::fromConfig($this->conf(), ['password' => 'wrong-secret-77']);
            self::fail('connected');
        } catch (ConnectionException $e) {
            self::assertStringContainsString('Redis authentication failed at 127.0.0.1:', $e->getMessage());
            self::assertStringNotContainsString('wrong-secret-77', (string) $e);
        }
    }

    public function testANodeCertificateOfAnotherCaIsRefused(): void
    {
        try {
            new Client(['cluster' => '127.0.0.1:' . self::$ports[0], 'cluster_tls' => true,
                'username' => self::USER, 'password' => self::PASSWORD, 'timeout' => 2]);
            self::fail('connected without trusting the test CA');
        } catch (ConnectionException $e) {
            self::assertStringContainsString('certificate verify failed', $e->getMessage());
            self::assertStringNotContainsString(self::PASSWORD, (string) $e);
        }
    }

    private function conf(): string
    {
        $path = self::$dir . '/delayer.conf';
        file_put_contents($path, "[delayer]\nlayout = topic\nkey_prefix = tls:\n\n[redis]\nmode = cluster\n"
            . 'nodes = ' . implode(',', array_map(static fn (int $p): string => "127.0.0.1:{$p}", self::$ports)) . "\n"
            . "tls = yes\ntls_ca_file = " . self::$certs['ca'] . "\nusername = " . self::USER . "\npassword = " . self::PASSWORD . "\n");
        return $path;
    }

    /** A port P such that P and its cluster bus port P + 10000 are free (never 6379). */
    private static function clusterPort(): int
    {
        for ($i = 0; $i < 100; $i++) {
            $port = RedisServer::freePort();
            if ($port + 10000 > 65535 || \in_array($port, self::$ports, true)) {
                continue;
            }
            $bus = @stream_socket_server('tcp://127.0.0.1:' . ($port + 10000));
            if ($bus !== false) {
                fclose($bus);
                return $port;
            }
        }
        self::fail('no free port pair for a cluster node');
    }

    private static function node(int $port): ?\Redis
    {
        $redis = new \Redis();
        try {
            if (!@$redis->connect('tls://127.0.0.1', $port, 1, null, 0, 1, ['stream' => ['cafile' => self::$certs['ca'], 'peer_name' => '127.0.0.1']])) {
                return null;
            }
            return $redis;
        } catch (\RedisException) {
            return null;
        }
    }

    private static function answers(int $port): int
    {
        try {
            return self::node($port)?->ping() ? 1 : 0;
        } catch (\RedisException) {
            return 0;
        }
    }

    private static function waitUntil(\Closure $done, string $what, float $deadline = 60.0): void
    {
        $until = microtime(true) + $deadline;
        while (true) {
            try {
                if ($done()) {
                    return;
                }
            } catch (\RedisException) {
                // not yet
            }
            if (microtime(true) > $until) {
                self::fail("not within {$deadline} s: {$what}");
            }
            usleep(50000);
        }
    }
}
