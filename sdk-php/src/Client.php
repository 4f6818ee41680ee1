<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;

/**
 * Delayer 2 client: push delayed jobs, pop or wait for due ones, cancel
 * them; or, at least once, reserve them and ack, release or bury them.
 *
 *     $client = new Client(['host' => '127.0.0.1', 'port' => 6379]);
 *     $client->push(new Message(['id' => 'order:42:cancel', 'topic' => 'order', 'body' => '42']), 1800);
 *     $message = $client->bPop('order', 5); // Message, or false after 5 s
 *     if ($job = $client->bReserve('order', 30, 5)) { // ttr 30 s, wait up to 5 s
 *         handle($job->body) ? $client->ack($job) : $client->release($job);
 *     }
 *
 * A drop-in replacement for mix/delayer-client 1.x's Delayer\Client
 * (sdk-php/README.md lists the differences). Each operation is one Lua
 * script; input is checked before any Redis call (InvalidArgumentException).
 * In the per-topic layout ids are per topic: calls naming a job by id take its topic too.
 *
 * The public methods are in {@see LegacyApi}, {@see Pushes}, {@see Reservations},
 * {@see DeadLetters}, {@see Inspect} and {@see FlowControl}. Every method that reaches Redis may
 * throw ConnectionException (transient), RedisErrorException (calling again
 * does not cure it) and ProtocolException. Do not share a Client across a fork.
 */
#[\AllowDynamicProperties]
class Client
{
    use LegacyApi;
    use Pushes;
    use Reservations;
    use DeadLetters;
    use Inspect;
    use FlowControl;

    /** mix/delayer-client 1.x's key names, for the default prefix (the client's own: {@see getKeys()}). */
    public const KEY_JOB_POOL = Keys::DEFAULT_PREFIX . 'job_pool';

    public const PREFIX_JOB_BUCKET = Keys::DEFAULT_PREFIX . 'job_bucket:';

    public const PREFIX_READY_QUEUE = Keys::DEFAULT_PREFIX . 'ready_queue:';

    /** How long a ready job waits for a consumer by default: 7 days, in seconds. */
    public const DEFAULT_READY_MAX_LIFETIME = 604800;

    public const DEFAULT_TIMEOUT = Options::DEFAULT_TIMEOUT;

    /** @var string 1.x's properties, set from the options (changing them later changes nothing) */
    public $host = '127.0.0.1';

    /** @var int */
    public $port = 6379;

    /** @var int */
    public $database = 0;

    /** @var string */
    public $password = '';

    /** @var \Redis 1.x's, unset and read through __get(): always the live connection */
    protected $_driver;

    private readonly RedisLink $connection;

    private readonly Keys $keys;

    /** Seconds a push waits for a replica (the durable option); null: no wait. */
    private readonly ?float $durable;

    /**
     * Connects to Redis; any key not an option becomes a property, as in 1.x.
     *
     * @param array<string, mixed> $config
     *        url      redis://[user:password@]host:port/db, rediss://... (TLS), unix:///path?db=N
     *        host, port, database  instead of url (default 127.0.0.1, 6379, 0)
     *        username, password    ACL user and password (override the url's)
     *        tls      with rediss://: cafile, local_cert + local_pk (PEM files)
     *        prefix   key prefix, as the server's key_prefix (default "delayer:")
     *        layout   "classic" (default, 1.x's) or "topic" (per-topic, as the server's)
     *        timeout  connect and read timeout in seconds (default 5)
     *        durable  true (1 s) or seconds a push waits for a replica (WAIT 1),
     *                 else NotReplicatedException
     *        sentinels, master_name, sentinel_username, sentinel_password,
     *        sentinel_tls  Redis Sentinel: the sentinels ("host:port,..." or
     *                 [host, port] pairs) and the master's name
     *        cluster, cluster_tls  Redis Cluster: seed nodes ("host:port,..."
     *                 or a list); per-topic layout, database 0 only
     * @throws ConfigException     on a bad value
     * @throws ConnectionException when Redis cannot be reached, or refuses the credentials or database
     */
    public function __construct(#[\SensitiveParameter] array $config = [])
    {
        foreach ($config as $key => $value) {
            if (\in_array($key, Options::KEYS, true)) {
                continue;
            }
            if (!\is_string($key) || $key === '' || \in_array($key, ['connection', 'keys', '_driver'], true)) {
                throw new ConfigException(sprintf('option %s is not a name the client can keep', var_export($key, true)));
            }
            $this->$key = $value;
        }
        $options = Options::parse($config, [
            'host' => $this->host, 'port' => $this->port, 'database' => $this->database, 'password' => $this->password,
        ]);
        $this->adopt($options->connection, $options->keys, $options->durable, $options->host, $options->port, $options->database, $options->password);
        $this->connect();
    }

    /**
     * A client from the server's delayer.conf ({@see ConfigFile}), with $overrides (any constructor option) on top.
     *
     * @throws ConfigException naming the file, line, section and key
     * @throws ConnectionException as the constructor
     */
    public static function fromConfig(string $iniPath, #[\SensitiveParameter] array $overrides = []): static
    {
        return new static(array_merge(ConfigFile::load($iniPath), $overrides));
    }

    /** `$this->_driver` for 1.x subclasses. */
    public function __get(string $name): mixed
    {
        if ($name === '_driver') {
            return $this->connection->driver();
        }
        trigger_error(sprintf('Undefined property: %s::$%s', static::class, $name), E_USER_WARNING);
        return null;
    }

    public function __isset(string $name): bool
    {
        return $name === '_driver';
    }

    /**
     * The properties with the password masked (1.x's $password is public, but dumps end up in logs).
     *
     * @return array<string, mixed>
     */
    public function __debugInfo(): array
    {
        $shown = get_object_vars($this);
        unset($shown['connection']);
        if (($shown['password'] ?? '') !== '') {
            $shown['password'] = '***';
        }
        return $shown;
    }

    /** The key names this client uses. */
    public function getKeys(): Keys
    {
        return $this->keys;
    }

    /**
     * Connects now unless connected (1.x's: a subclass may override it, untyped).
     *
     * @return void
     */
    protected function connect()
    {
        $this->connection->open();
    }

    /** A plain Client with this one's options on a connection of its own (the Worker's touches from a signal handler). */
    public function withOwnConnection(): self
    {
        $copy = (new \ReflectionClass(self::class))->newInstanceWithoutConstructor();
        $copy->adopt($this->connection->copy(), $this->keys, $this->durable, $this->host, $this->port, $this->database, $this->password);
        return $copy;
    }

    /** @internal Redis's maxmemory-policy, or null when Redis would not tell ({@see Eviction}), for the {@see Worker} */
    public function maxmemoryPolicy(): ?string
    {
        return Eviction::read($this->connection);
    }

    /** Closes the connection; a later call opens a new one. */
    public function close(): void
    {
        $this->connection->close();
    }

    /** What the constructor and withOwnConnection() set. */
    private function adopt(
        RedisLink $connection,
        Keys $keys,
        ?float $durable,
        string $host,
        int $port,
        int $database,
        #[\SensitiveParameter] string $password,
    ): void {
        $this->connection = $connection;
        $this->keys = $keys;
        $this->durable = $durable;
        $this->host = $host;
        $this->port = $port;
        $this->database = $database;
        $this->password = $password;
        unset($this->_driver); // read through __get(): always the live connection
    }
}
