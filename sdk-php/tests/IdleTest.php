<?php

declare(strict_types=1);

namespace Delayer\Tests;

use Delayer\Message;
use Delayer\ReservedMessage;

/**
 * A worker idle longer than every client-side timeout still waits its full
 * timeout, and forever with 0 (issue 10, items 1 and 4). PHP's defaults
 * (default_socket_timeout 60 s, the client's 5 s read timeout) are too long
 * for a test: both are set short here, below the waits.
 */
final class IdleTest extends RedisTestCase
{
    /** The client's connect and read timeout, seconds. */
    private const SHORT = 0.5;

    /** PHP's default_socket_timeout, whole seconds. */
    private const SOCKET_TIMEOUT = 1;

    /** How long the calls wait: longer than both. */
    private const WAIT = 2.0;

    private string $savedSocketTimeout = '';

    /** @var resource|null */
    private $pusher = null;

    protected function setUp(): void
    {
        parent::setUp();
        $this->savedSocketTimeout = (string) ini_get('default_socket_timeout');
        ini_set('default_socket_timeout', (string) self::SOCKET_TIMEOUT);
    }

    protected function tearDown(): void
    {
        ini_set('default_socket_timeout', $this->savedSocketTimeout);
        if ($this->pusher !== null) {
            proc_terminate($this->pusher);
            proc_close($this->pusher);
        }
        parent::tearDown();
    }

    public function testABlockingCallWaitsItsWholeTimeout(): void
    {
        $client = $this->client(['timeout' => self::SHORT]);
        foreach (['bPop' => static fn () => $client->bPop('idle', self::WAIT), 'bReserve' => static fn () => $client->bReserve('idle', 30, self::WAIT)] as $name => $call) {
            $start = microtime(true);
            self::assertFalse($call(), "{$name}: no job, no error");
            self::assertGreaterThanOrEqual(self::WAIT, microtime(true) - $start, "{$name} waited its whole timeout");
        }
        self::assertFalse($client->pop('idle'), 'the connection is fine afterwards');
    }

    public function testTimeoutZeroWaitsUntilAJobComes(): void
    {
        $client = $this->client(['timeout' => self::SHORT]);
        foreach (['bPop' => static fn () => $client->bPop('idle', 0), 'bReserve' => static fn () => $client->bReserve('idle', 30, 0)] as $name => $call) {
            $start = microtime(true);
            $this->readyLater("job:{$name}", self::WAIT);
            $job = $call();
            self::assertGreaterThanOrEqual(self::WAIT, microtime(true) - $start, "{$name} waited for the job");
            self::assertInstanceOf($name === 'bPop' ? Message::class : ReservedMessage::class, $job);
            self::assertSame("job:{$name}", $job->id);
            proc_close($this->pusher);
            $this->pusher = null;
        }
    }

    /** Another process makes a job ready on topic "idle" after $seconds (as the server would). */
    private function readyLater(string $id, float $seconds): void
    {
        $code = sprintf(
            'usleep(%1$d); $r = new Redis(); $r->connect("127.0.0.1", %2$d);'
            . ' $r->hMSet("delayer:job_bucket:%3$s", ["topic" => "idle", "body" => "b"]);'
            . ' $r->lPush("delayer:ready_queue:idle", "%3$s");',
            (int) ($seconds * 1e6),
            RedisServer::shared()->port,
            $id
        );
        $this->pusher = proc_open([PHP_BINARY, '-r', $code], [], $pipes);
        self::assertIsResource($this->pusher);
    }
}
