<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;

/**
 * Delayer 2 client: push delayed jobs, pop or wait for due ones, cancel them;
 * or, at least once, reserve them and ack, release or bury them.
 *
 * A drop-in replacement for mix/delayer-client 1.x's Delayer\Client: its
 * constants, its public properties ($host, $port, $database, $password), its
 * protected $_driver and connect(), and its four methods with their 1.x
 * declarations (untyped, so a 1.x subclass that overrides them still
 * loads; the 1.x parameter names, so named arguments work). See
 * sdk-php/README.md for every difference. It speaks docs/PROTOCOL.md: every
 * write is one Lua script run by EVALSHA, "now" is Redis's clock, and all
 * input is checked before any Redis call.
 *
 *     $client = new Client(['host' => '127.0.0.1', 'port' => 6379, 'database' => 0, 'password' => '']);
 *     $client->push(new Message(['id' => 'order:42:cancel', 'topic' => 'order', 'body' => '42']), 1800);
 *     $message = $client->bPop('order', 5); // Message, or false after 5 s
 *
 * pop() and bPop() delete a job as they hand it out (at most once: a worker
 * that dies mid-job loses it). reserve() and bReserve() hand it out reserved
 * for a time-to-run instead, and the worker ends the reservation:
 *
 *     if ($job = $client->bReserve('order', 30, 5)) { // ttr 30 s, wait up to 5 s
 *         handle($job->body) ? $client->ack($job) : $client->release($job);
 *     }
 *
 * Ids are global across topics in the classic key layout (Delayer 1.x's, the
 * default): a push replaces the job that has its id, whatever that job's
 * topic, unless it is made with `ifAbsent: true` ({@see schedule()}). In the
 * per-topic layout (option `layout => 'topic'`, or `[delayer] layout =
 * topic`: every topic's keys in one hash slot) ids are per topic, a topic
 * may not contain "{" or "}", and the calls that name a job by id alone
 * take its topic too: remove($id, $topic), reschedule($id, $delay, $topic),
 * and ack / touch / release / bury with an id and `topic:` (a
 * ReservedMessage carries its own).
 *
 * This class is the public methods only, by concern: 1.x's four in
 * {@see LegacyApi}, Delayer 2's pushes in {@see Pushes}, at least once in
 * {@see Reservations}, dead letters in {@see DeadLetters}, inspection in
 * {@see Inspect}; here, what makes and holds the connection. Options are
 * {@see Options}'s, the calls {@see Calls}'s and their replies {@see Replies}'s (no I/O), the
 * socket {@see Connection}'s ({@see ClusterConnection}'s on a Redis
 * Cluster, option `cluster`). One Client holds one Redis connection, opened
 * by the constructor; it is not meant to be shared between processes (fork
 * after connecting). A call that loses it (Redis restarted, the network dropped)
 * raises ConnectionException, and the next call connects again: a worker
 * catches the exception, waits a little and goes on
 * (sdk-php/examples/worker.php). A command Redis refuses raises
 * RedisErrorException instead, which calling again does not cure.
 */
#[\AllowDynamicProperties]
class Client
{
    use LegacyApi;
    use Pushes;
    use Reservations;
    use DeadLetters;
    use Inspect;

    /** mix/delayer-client 1.x's key names, for the default prefix (the client's own: {@see getKeys()}). */
    public const KEY_JOB_POOL = Keys::DEFAULT_PREFIX . 'job_pool';

    /** The bucket key of a job is this and its id (default prefix). */
    public const PREFIX_JOB_BUCKET = Keys::DEFAULT_PREFIX . 'job_bucket:';

    /** The ready queue of a topic is this and the topic (default prefix). */
    public const PREFIX_READY_QUEUE = Keys::DEFAULT_PREFIX . 'ready_queue:';

    /** How long a ready job waits for a consumer by default: 7 days, in seconds. */
    public const DEFAULT_READY_MAX_LIFETIME = 604800;

    /** Default connect and read timeout, in seconds. */
    public const DEFAULT_TIMEOUT = Options::DEFAULT_TIMEOUT;

    /**
     * The Redis host (1.x's property). Set from the options when the client
     * is built; a subclass may declare another default. Changing it later
     * changes nothing: the connection is the constructor's.
     *
     * @var string
     */
    public $host = '127.0.0.1';

    /** @var int the Redis port (1.x's property; 0 for a unix socket), as $host */
    public $port = 6379;

    /** @var int the database number (1.x's property), as $host */
    public $database = 0;

    /** @var string the password, "" for none (1.x's property), as $host */
    public $password = '';

    /**
     * The live phpredis instance, for 1.x subclasses that call Redis
     * themselves. Read-only here: it is unset by the constructor and read
     * through __get(), so that it is always the live connection (a lost
     * connection is replaced by the next call).
     *
     * @var \Redis
     */
    protected $_driver;

    private readonly RedisLink $connection;

    private readonly Keys $keys;

    /** Seconds a push waits for a replica (the durable option); null: no wait. */
    private readonly ?float $durable;

    /**
     * Connects to Redis (and authenticates, and selects the database).
     *
     * Either url, or host / port / database (not both). As in 1.x, any other
     * key becomes a property of the client (a subclass may declare it and
     * use it; the client itself does not read it): `timeout` is this SDK's,
     * `persistent` or `read_timeout` of a 1.x configuration are kept and
     * ignored.
     *
     * @param array{url?: string, host?: string, port?: int|string, database?: int|string, username?: ?string, password?: ?string, tls?: array{cafile?: string, local_cert?: string, local_pk?: string}, prefix?: string, layout?: 'classic'|'topic', timeout?: int|float|string, cluster?: string|list<string>, cluster_tls?: bool} $config
     *        url      redis://[user:password@]host:port/db, rediss://... (TLS)
     *                 or unix:///path/to/redis.sock (also redis+unix://; ?db=N)
     *        host     Redis host name, IP or unix socket path (default "127.0.0.1")
     *        port     Redis port (default 6379)
     *        database database number for SELECT (default 0)
     *        username ACL user name (default none: the "default" user);
     *                 overrides the url's
     *        password password for AUTH; "" or null for none (default);
     *                 overrides the url's
     *        tls      with a rediss:// url: cafile (PEM of the CA to trust
     *                 instead of the system's), local_cert + local_pk (PEM
     *                 client certificate and key, for mutual TLS)
     *        prefix   key prefix, as the server's key_prefix (default "delayer:")
     *        layout   the key layout, as the server's [delayer] layout:
     *                 "classic" (default; Delayer 1.x's) or "topic" (the
     *                 per-topic layout; the prefix may not hold "{" or "}")
     *        timeout  connect and read timeout in seconds (default 5)
     *        durable  true (1 s) or seconds: each push (schedule, pushTo,
     *                 pushMany; push() too) then waits for a replica to have
     *                 it (WAIT 1) and throws NotReplicatedException when none
     *                 did in time; without it a failover can lose the last
     *                 acknowledged pushes (README, "Redis Sentinel")
     *        sentinels, master_name, sentinel_username, sentinel_password,
     *        sentinel_tls  Redis Sentinel instead of url/host/port: the
     *                 sentinels ("host:port,..." or [host, port] pairs) and
     *                 the name they monitor the master under; every new
     *                 connection goes to the master they name
     *        cluster, cluster_tls  Redis Cluster instead of url/host/port:
     *                 the seed nodes
     *                 (['127.0.0.1:7000', ...] or "host:port,...");
     *                 the per-topic layout is implied (layout "classic" is
     *                 refused), database 0 only; cluster_tls: TLS to every
     *                 node with the tls files (README, "Redis Cluster")
     * @throws ConfigException     on a bad value
     * @throws ConnectionException when Redis cannot be reached, refuses the
     *                             credentials, or refuses the database (a
     *                             \RedisException, as in 1.x)
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
     * Builds a client from the server's delayer.conf.
     *
     * Reads [redis] url (or host, port, database), username, password,
     * tls_ca_file, tls_cert_file, tls_key_file and [delayer] key_prefix, layout;
     * the server's other keys are accepted and not used, and a key or
     * section the server does not know is refused as the server refuses it
     * (file:line, section, key, and the keys allowed). Comments start with ";" or "#"
     * (whole line or inline, as "port = 6380 ; the test instance"); quote a
     * value that starts with ";" ("password = \";secret\"").
     *
     * @param string $iniPath path of delayer.conf
     * @param array{timeout?: int|float} $overrides options applied on top of
     *        the file's (any constructor option)
     * @throws ConfigException     when the file cannot be read, holds a bad
     *                             value or an unknown key or section (the
     *                             message names file, line, section, key)
     * @throws ConnectionException as the constructor
     */
    public static function fromConfig(string $iniPath, #[\SensitiveParameter] array $overrides = []): static
    {
        return new static(array_merge(ConfigFile::load($iniPath), $overrides));
    }

    /**
     * `$this->_driver` for 1.x subclasses: the live phpredis instance.
     *
     * @throws ConnectionException when there is none and Redis cannot be reached
     */
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
     * What var_dump() and print_r() show: the properties, with the password
     * masked (1.x's $password is public, but dumps end up in logs).
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

    /** The key names this client uses (built from its prefix). */
    public function getKeys(): Keys
    {
        return $this->keys;
    }

    /**
     * Connects now unless connected (1.x's connect(), called by the
     * constructor; a subclass may override it and call parent::connect()).
     *
     * @return void
     * @throws ConnectionException
     */
    protected function connect()
    {
        $this->connection->open();
    }

    /**
     * A client with this one's options (server, credentials, database,
     * prefix, timeout) on a connection of its own, opened by its first call:
     * for calls that must not interleave with this client's, such as the
     * {@see Worker}'s touches from a signal handler. It is a plain Client,
     * whatever this one's class, and keeps none of 1.x's extra properties.
     */
    public function withOwnConnection(): self
    {
        $copy = (new \ReflectionClass(self::class))->newInstanceWithoutConstructor();
        $copy->adopt($this->connection->copy(), $this->keys, $this->durable, $this->host, $this->port, $this->database, $this->password);
        return $copy;
    }

    /**
     * Redis's maxmemory-policy, or null when Redis would not tell
     * ({@see Eviction::read()}): what the Worker checks at start and after
     * a reconnect.
     *
     * @internal used by {@see Worker}; not part of the public API.
     * @throws Exception\ConnectionException
     */
    public function maxmemoryPolicy(): ?string
    {
        return Eviction::read($this->connection);
    }

    /**
     * Closes the Redis connection. A later call opens a new one (as after a
     * lost connection), so a client may be closed while idle.
     */
    public function close(): void
    {
        $this->connection->close();
    }

    /**
     * Sets what a client is made of: the constructor's options, or those of
     * the client withOwnConnection() copies.
     */
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
