<?php

declare(strict_types=1);

namespace Delayer\Tests;

use PHPUnit\Framework\TestCase;

/**
 * The drop-in criterion of issue 11: compat/v1_script.php, written against
 * mix/delayer-client 1.x's API (constants, properties, a subclass, named
 * arguments, exceptions, odd ids and topics, string and negative delays),
 * runs unchanged as its own php process against a real redis-server and
 * the real delayer server, and prints exactly compat/v1_script.expected,
 * which is what the original client prints for it.
 */
final class CompatTest extends TestCase
{
    private ?RedisServer $redis = null;

    /** @var resource|null */
    private $server = null;

    private string $dir = '';

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/delayer-php-compat-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        if ($this->server !== null) {
            proc_terminate($this->server, SIGTERM);
            $until = microtime(true) + 10;
            while (proc_get_status($this->server)['running'] && microtime(true) < $until) {
                usleep(20000);
            }
            if (proc_get_status($this->server)['running']) {
                proc_terminate($this->server, SIGKILL);
            }
            proc_close($this->server);
            $this->server = null;
        }
        $this->redis?->stop();
        foreach (glob($this->dir . '/*') ?: [] as $file) {
            @unlink($file);
        }
        @rmdir($this->dir);
    }

    public function testA1xScriptPrintsWhatTheOriginalClientPrints(): void
    {
        $this->redis = RedisServer::start();
        $this->startDelayerServer();

        $script = __DIR__ . '/compat/v1_script.php';
        $env = [
            'DELAYER_COMPAT_HOST' => '127.0.0.1',
            'DELAYER_COMPAT_PORT' => (string) $this->redis->port,
            'DELAYER_COMPAT_CLOSED_PORT' => (string) RedisServer::freePort(),
            'DELAYER_AUTOLOAD' => \dirname(__DIR__) . '/vendor/autoload.php',
        ] + getenv();
        $process = proc_open(
            [PHP_BINARY, '-d', 'display_errors=stderr', '-d', 'error_reporting=-1', $script],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/stdout", 'w'], 2 => ['file', "{$this->dir}/stderr", 'w']],
            $pipes,
            null,
            $env
        );
        self::assertIsResource($process);
        $until = microtime(true) + 120;
        while (($state = proc_get_status($process))['running'] && microtime(true) < $until) {
            usleep(50000);
        }
        $running = $state['running'];
        if ($running) {
            proc_terminate($process, SIGKILL);
        }
        proc_close($process);
        $status = $state['exitcode'];
        $stdout = (string) file_get_contents("{$this->dir}/stdout");
        $stderr = (string) file_get_contents("{$this->dir}/stderr");
        self::assertFalse($running, "the script did not finish within 120 s; stdout:\n{$stdout}\nstderr:\n{$stderr}");
        self::assertSame((string) file_get_contents(__DIR__ . '/compat/v1_script.expected'), $stdout, "stderr:\n{$stderr}");
        self::assertSame('', $stderr, 'no warning, notice or deprecation');
        self::assertSame(0, $status);
    }

    public function testA1xSubclassOverridingEveryMethodLoads(): void
    {
        $output = [];
        exec(
            'DELAYER_AUTOLOAD=' . escapeshellarg(\dirname(__DIR__) . '/vendor/autoload.php') . ' '
            . escapeshellarg(PHP_BINARY) . ' -d display_errors=stdout -d error_reporting=-1 '
            . escapeshellarg(__DIR__ . '/compat/v1_subclass.php') . ' 2>&1',
            $output,
            $code
        );
        self::assertSame(['loaded'], $output);
        self::assertSame(0, $code);
    }

    /**
     * The delayer binary (env DELAYER_BIN, or target/debug/delayer, built
     * when missing) on the test's Redis, moving every 50 ms; up once it has
     * moved a due probe job.
     */
    private function startDelayerServer(): void
    {
        $root = \dirname(__DIR__, 2);
        $binary = getenv('DELAYER_BIN') ?: "{$root}/target/debug/delayer";
        if (!is_file($binary)) {
            exec('cargo build -q -p delayer-server --manifest-path ' . escapeshellarg("{$root}/Cargo.toml") . ' 2>&1', $out, $code);
            self::assertSame(0, $code, "cargo build -p delayer-server failed:\n" . implode("\n", $out));
        }
        $conf = "{$this->dir}/delayer.conf";
        file_put_contents($conf, "[delayer]\ntimer_interval = 50\nkey_prefix = delayer:\nlog_level = info\n\n"
            . "[redis]\nhost = 127.0.0.1\nport = {$this->redis->port}\ndatabase = 0\npassword =\n");
        $this->server = proc_open(
            [$binary, '-c', $conf],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "{$this->dir}/server.log", 'w'], 2 => ['file', "{$this->dir}/server.log", 'a']],
            $pipes,
            $this->dir
        );
        self::assertIsResource($this->server);
        $redis = $this->redis->connect();
        $redis->hMSet('delayer:job_bucket:probe', ['topic' => 'compat-probe', 'body' => 'p']);
        $redis->zAdd('delayer:job_pool', 0, 'probe');
        $until = microtime(true) + 60;
        while ($redis->lRem('delayer:ready_queue:compat-probe', 'probe', 0) !== 1) {
            $log = (string) @file_get_contents("{$this->dir}/server.log");
            self::assertTrue(proc_get_status($this->server)['running'], "the delayer server exited:\n{$log}");
            self::assertLessThan($until, microtime(true), "the delayer server moved nothing within 60 s:\n{$log}");
            usleep(20000);
        }
        $redis->del('delayer:job_bucket:probe');
        $redis->close();
    }
}
