<?php
/*
 * A script written against mix/delayer-client 1.x's API, unchanged but for
 * where Redis is (env DELAYER_COMPAT_HOST / _PORT, and _CLOSED_PORT, a port
 * nothing listens on) and where the autoloader is (env DELAYER_AUTOLOAD).
 * CompatTest runs it against a real redis-server and the real delayer
 * server, and compares what it prints with v1_script.expected: what
 * mix/delayer-client 1.x prints for it (on PHP 7, which warns of no dynamic
 * properties). It keeps to what both clients answer alike (README,
 * "Differences from mix/delayer-client": 1.x's push returns false for an id
 * still waiting, its remove false for a job already ready).
 */

require getenv('DELAYER_AUTOLOAD') ?: __DIR__ . '/../../vendor/autoload.php';

use Delayer\Client;
use Delayer\Message;

$host = getenv('DELAYER_COMPAT_HOST') ?: '127.0.0.1';
$port = (int) getenv('DELAYER_COMPAT_PORT');
$closedPort = (int) getenv('DELAYER_COMPAT_CLOSED_PORT');

/** A 1.x subclass: its own defaults, its own pop, Redis through $_driver. */
class OrderClient extends Client
{
    public $host = '127.0.0.1';

    public $database = 0;

    public $popped = 0;

    public function pop($topic)
    {
        $message = parent::pop($topic);
        if ($message !== false) {
            $this->popped++;
        }
        return $message;
    }

    public function bPop($topic, $timeout)
    {
        echo "OrderClient::bPop({$topic})\n";
        return parent::bPop($topic, $timeout);
    }

    public function queueLength($topic)
    {
        return $this->_driver->lLen(self::PREFIX_READY_QUEUE . $topic);
    }
}

function show($label, $value)
{
    if ($value instanceof Message) {
        $value = 'Message(' . $value->id . ' | ' . $value->topic . ' | ' . $value->body . ')';
    } else {
        $value = var_export($value, true);
    }
    echo $label, ': ', $value, "\n";
}

// constants
show('KEY_JOB_POOL', Client::KEY_JOB_POOL);
show('PREFIX_JOB_BUCKET', Client::PREFIX_JOB_BUCKET);
show('PREFIX_READY_QUEUE', Client::PREFIX_READY_QUEUE);

// a client, with keys of the 1.x era that the client does not use
$client = new Client([
    'host'       => $host,
    'port'       => $port,
    'database'   => 0,
    'password'   => '',
    'timeout'    => 5,
    'persistent' => false,
]);
show('host', $client->host === $host);
show('port', $client->port === $port);
show('database', $client->database);
show('password', $client->password);
show('persistent', $client->persistent);

// push and bPop: a topic with a space, a body with JSON
show('push order:1', $client->push(new Message(['id' => 'order:1', 'topic' => 'close order', 'body' => '{"order":1}']), 0));
show('bPop close order', $client->bPop('close order', 10));

// an int id, a numeric-string delay and lifetime
show('push 42', $client->push(new Message(['id' => 42, 'topic' => 'sms', 'body' => 'hello']), '0', '3600'));
show('bPop sms', $client->bPop('sms', 10));

// a negative delay (due now), braces in id and topic
show('push braces', $client->push(new Message(['id' => '{order}:2', 'topic' => '{shop}', 'body' => 'b']), -30));
show('bPop {shop}', $client->bPop('{shop}', 10));

// a long id, an extra Message key
$long = str_repeat('L', 300);
$message = new Message(['id' => $long, 'topic' => 'long', 'body' => 'x', 'priority' => 'high']);
show('validate long', $message->validate());
show('push long', $client->push($message, 1));
$popped = $client->bPop('long', 10);
show('bPop long id length', strlen($popped->id));
show('bPop long body', $popped->body);

// named arguments with 1.x's parameter names
show('push named', $client->push(message: new Message(['id' => 'n:1', 'topic' => 'named', 'body' => 'by name']), delayTime: 0, readyMaxLifetime: 600));
show('bPop named', $client->bPop(topic: 'named', timeout: 10));
show('pop named again', $client->pop(topic: 'named'));

// remove: a waiting job, then again, then an int id never pushed
show('push wait:1', $client->push(new Message(['id' => 'wait:1', 'topic' => 'later', 'body' => 'w']), 3600));
show('remove wait:1', $client->remove(id: 'wait:1'));
show('remove wait:1 again', $client->remove('wait:1'));
show('push 7', $client->push(new Message(['id' => 7, 'topic' => 'later', 'body' => 'seven']), '3600'));
show('remove 7', $client->remove(7));
show('remove 12345', $client->remove(12345));

// nothing ready
show('pop empty', $client->pop('empty'));
show('bPop empty', $client->bPop('empty', 1));

// invalid messages: \InvalidArgumentException, as 1.x's validate() decides
foreach ([
    'empty body' => new Message(['id' => 'x', 'topic' => 't', 'body' => '']),
    'no topic'   => new Message(['id' => 'x', 'body' => 'b']),
    'null id'    => new Message(['id' => null, 'topic' => 't', 'body' => 'b']),
] as $what => $bad) {
    show("validate {$what}", $bad->validate());
    try {
        $client->push($bad, 0);
        echo "push {$what}: accepted\n";
    } catch (\InvalidArgumentException $e) {
        echo "push {$what}: InvalidArgumentException\n";
    }
}

// a subclass: its own defaults and overrides, Redis through $_driver
$orders = new OrderClient(['port' => $port]);
show('subclass push', $orders->push(new Message(['id' => 'o:1', 'topic' => 'orders', 'body' => 'first']), 0));
show('subclass push', $orders->push(new Message(['id' => 'o:2', 'topic' => 'orders', 'body' => 'second']), 0));
show('subclass bPop', $orders->bPop('orders', 10));
$deadline = microtime(true) + 20;
while ($orders->queueLength('orders') < 1 && microtime(true) < $deadline) {
    usleep(20000);
}
show('subclass queueLength', $orders->queueLength('orders'));
show('subclass pop', $orders->pop('orders'));
show('subclass popped', $orders->popped);
show('subclass pop empty', $orders->pop('orders'));

// a job pushed by one client, taken by another
show('push handover', $client->push(new Message(['id' => 'h:1', 'topic' => 'handover', 'body' => 'from client']), 0));
show('subclass bPop handover', $orders->bPop('handover', 10));

// connection failures are \RedisException
try {
    new Client(['host' => '127.0.0.1', 'port' => $closedPort]);
    echo "connect closed port: connected\n";
} catch (\RedisException $e) {
    echo "connect closed port: RedisException\n";
}
