<?php
/*
 * A subclass of mix/delayer-client 1.x's Client that overrides every 1.x
 * method with 1.x's own declaration. Loading it is the test: PHP refuses
 * to load a class whose methods are not compatible with its parent's.
 * CompatTest runs it as its own php process (env DELAYER_AUTOLOAD).
 */

require getenv('DELAYER_AUTOLOAD') ?: __DIR__ . '/../../vendor/autoload.php';

use Delayer\Client;
use Delayer\Message;

class V1Subclass extends Client
{
    public $host = '127.0.0.1';

    public $port = 6379;

    public $database = 0;

    public $password = '';

    public function __construct(array $config)
    {
        parent::__construct($config);
    }

    protected function connect()
    {
        parent::connect();
    }

    public function push(Message $message, $delayTime, $readyMaxLifetime = 604800)
    {
        return parent::push($message, $delayTime, $readyMaxLifetime);
    }

    public function pop($topic)
    {
        return parent::pop($topic);
    }

    public function bPop($topic, $timeout)
    {
        return parent::bPop($topic, $timeout);
    }

    public function remove($id)
    {
        return parent::remove($id);
    }
}

echo "loaded\n";
