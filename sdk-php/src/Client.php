<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\IdTakenException;
use Delayer\Exception\NotReplicatedException;
use Delayer\Exception\InvalidArgumentException;
use Delayer\Exception\ProtocolException;
use Delayer\Exception\RedisErrorException;

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
 * Ids are global across topics (Delayer 1.x's key layout): a push replaces
 * the job that has its id, whatever that job's topic, unless it is made with
 * `ifAbsent: true` ({@see schedule()}).
 *
 * This class is the public methods only: options are {@see Options}'s, the
 * calls and their replies {@see Ops}'s (no I/O), the socket
 * {@see Connection}'s. One Client holds one Redis connection, opened by the
 * constructor; it is not meant to be shared between processes (fork after
 * connecting). A call that loses it (Redis restarted, the network dropped)
 * raises ConnectionException, and the next call connects again: a worker
 * catches the exception, waits a little and goes on
 * (sdk-php/examples/worker.php). A command Redis refuses raises
 * RedisErrorException instead, which calling again does not cure.
 */
#[\AllowDynamicProperties]
class Client
{
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

    /** How many push_many.lua calls pushMany() sends per pipeline. */
    private const CALLS_PER_PIPELINE = 10;

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

    private readonly Connection $connection;

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
     * @param array{url?: string, host?: string, port?: int|string, database?: int|string, username?: ?string, password?: ?string, tls?: array{cafile?: string, local_cert?: string, local_pk?: string}, prefix?: string, timeout?: int|float|string} $config
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
        $this->connection = $options->connection;
        $this->keys = $options->keys;
        $this->durable = $options->durable;
        $this->host = $options->host;
        $this->port = $options->port;
        $this->database = $options->database;
        $this->password = $options->password;
        unset($this->_driver); // read through __get(): always the live connection
        $this->connect();
    }

    /**
     * Builds a client from the server's delayer.conf.
     *
     * Reads [redis] url (or host, port, database), username, password,
     * tls_ca_file, tls_cert_file, tls_key_file and [delayer] key_prefix;
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
     * Schedules a job, as mix/delayer-client 1.x did: it reaches its topic's
     * ready queue $delayTime seconds from now (Redis's clock).
     *
     * Takes what 1.x took: a delay or lifetime given as a numeric string
     * ("30"), a negative delay (due now), an int id. Like 1.x it refuses a
     * Message whose id, topic or body is empty: a Delayer 1.x server drops
     * a job with an empty body ("Job bucket has expired or is incomplete"),
     * so a fleet that still runs one must not push it (docs/PROTOCOL.md, "The
     * job bucket"); {@see schedule()} pushes one. Declared as 1.x declared
     * it, so a 1.x subclass overriding it still loads.
     *
     * Ids are global across topics (the Delayer 1.x key layout): pushing an
     * id that a job already has, on any topic, replaces that job (its
     * topic, data and due time), as Delayer 1.x does. To be told instead,
     * use schedule(..., ifAbsent: true).
     *
     * @param Message         $message          the job
     * @param int|float|string $delayTime       seconds, up to 315360000, fractions allowed
     *                                          (rounded to the millisecond); below 0: now
     * @param int|float|string $readyMaxLifetime how long, in whole seconds (1 to 315360000),
     *                                          a due job waits for a consumer before it expires
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input, an empty body included
     *                                  (nothing is sent to Redis)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function push(Message $message, $delayTime, $readyMaxLifetime = 604800)
    {
        if ($message->body === '') {
            throw new InvalidArgumentException(
                'Invalid message: the body is empty (Delayer 1.x consumers drop such a job; schedule() pushes it)'
            );
        }
        $delay = Validator::legacySeconds('delayTime', $delayTime);
        return $this->pushOne(
            Ops::job($this->keys, $message, max($delay, 0), Validator::legacySeconds('readyMaxLifetime', $readyMaxLifetime)),
            false
        );
    }

    /**
     * Schedules a job (the typed push of Delayer 2): as {@see push()}, but an
     * empty body is valid, a delay is 0 or more, and with `ifAbsent: true`
     * nothing is written when the id is taken: IdTakenException names the
     * job holding it (its topic, and its due time while it waits).
     *
     * @param int|float $delay            seconds, 0 to 315360000, fractions allowed
     *                                    (rounded to the millisecond)
     * @param int|float $readyMaxLifetime whole seconds, 1 to 315360000
     * @param bool      $ifAbsent         true: only if no job has the id, else
     *                                    IdTakenException; false: replace (1.x)
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when the id is taken (nothing was written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function schedule(
        Message $message,
        int|float $delay,
        int|float $readyMaxLifetime = self::DEFAULT_READY_MAX_LIFETIME,
        bool $ifAbsent = false,
    ): bool {
        return $this->pushOne(Ops::job($this->keys, $message, $delay, $readyMaxLifetime), $ifAbsent);
    }

    /**
     * The short form of {@see schedule()}: a job from its parts, with the
     * default ready_max_lifetime (7 days).
     *
     *     $client->pushTo('order', 'order:43:close', 1.5, '{"order":43}');
     *
     * @param int|float $delay seconds, 0 to 315360000, fractions allowed
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when the id is taken (nothing was written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pushTo(string $topic, string|int $id, int|float $delay, string $body = '', bool $ifAbsent = false): bool
    {
        $message = Message::create(Validator::name('id', $id), $topic, $body);
        return $this->schedule($message, $delay, self::DEFAULT_READY_MAX_LIFETIME, $ifAbsent);
    }

    /**
     * Schedules many jobs in pipelined round trips: push_many.lua takes 100
     * jobs per call, 10 calls go per round trip. The jobs of one call are
     * atomic together; the batch as a whole is not. Every job is validated
     * before anything is sent.
     *
     * Each item is a {@see ScheduledMessage}, or a list
     * [Message $message, int|float $delay] or
     * [Message $message, int|float $delay, int $readyMaxLifetime].
     *
     * Ids are global across topics, as in {@see push()}: by default a taken
     * id's job is replaced (also by a later item of the same batch). With
     * `ifAbsent: true` the jobs whose id is taken are not written, the others
     * are, and then IdTakenException lists the taken ids and carries the due
     * time of every job written.
     *
     * @param iterable<ScheduledMessage|array{0: Message, 1: int|float, 2?: int}> $messagesWithDelays
     * @param bool $ifAbsent true: write only the jobs whose id no job has; false: replace (1.x)
     * @return int the number of jobs pushed
     * @throws InvalidArgumentException on a bad item (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when ids were taken (after the others were written)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pushMany(iterable $messagesWithDelays, bool $ifAbsent = false): int
    {
        $jobs = [];
        foreach ($messagesWithDelays as $index => $item) {
            if (\is_array($item)) {
                $count = \count($item);
                if (!array_is_list($item) || $count < 2 || $count > 3 || !$item[0] instanceof Message
                    || !(\is_int($item[1]) || \is_float($item[1]))
                    || ($count === 3 && !(\is_int($item[2]) || \is_float($item[2])))
                ) {
                    throw new InvalidArgumentException(sprintf(
                        'pushMany item %s: expected a ScheduledMessage or [Message, delay(, readyMaxLifetime)]',
                        var_export($index, true)
                    ));
                }
                $item = new ScheduledMessage($item[0], $item[1], $item[2] ?? self::DEFAULT_READY_MAX_LIFETIME);
            }
            if (!$item instanceof ScheduledMessage) {
                throw new InvalidArgumentException(sprintf(
                    'pushMany item %s: expected a ScheduledMessage or [Message, delay(, readyMaxLifetime)], got %s',
                    var_export($index, true),
                    get_debug_type($item)
                ));
            }
            try {
                $jobs[] = Ops::job($this->keys, $item->message, $item->delay, $item->readyMaxLifetime);
            } catch (InvalidArgumentException $e) {
                throw new InvalidArgumentException(
                    sprintf('pushMany item %s: %s', var_export($index, true), $e->getMessage()),
                    0,
                    $e
                );
            }
        }
        $dues = [];
        $taken = [];
        foreach (array_chunk(Ops::pushMany($this->keys, $jobs, $ifAbsent), self::CALLS_PER_PIPELINE) as $pipeline) {
            foreach ($this->connection->pipelined(Scripts::PUSH_MANY, $pipeline) as $i => $reply) {
                foreach (Ops::pushManyEntries($reply, $pipeline[$i]) as $entry) {
                    $due = PushReply::read($entry, $jobs[\count($dues)][1][0], Scripts::PUSH_MANY);
                    if ($due instanceof Taken) {
                        $taken[] = $due;
                        $due = null;
                    }
                    $dues[] = $due;
                }
            }
        }
        // One WAIT covers every write this connection made.
        $this->awaitReplica(\count($jobs) - \count($taken));
        if ($taken !== []) {
            throw new IdTakenException($taken, $dues);
        }
        return \count($jobs);
    }

    /**
     * Takes the next ready job of a topic, if any, without waiting. The job
     * is deleted from Redis as it is handed out (at most once). Ids whose
     * job expired or was removed are skipped. Declared as 1.x declared it.
     *
     * @param string|int $topic any non-empty string (an int is its decimal string)
     *
     * @return Message|false the job, or false when none is ready
     * @throws InvalidArgumentException on a bad topic
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function pop($topic)
    {
        $call = Ops::pop($this->keys, Validator::name('topic', $topic));
        return Ops::message($this->connection->script(...$call), Scripts::POP);
    }

    /**
     * Takes the next ready job of a topic, waiting up to $timeout seconds
     * for one (BRPOP, then take.lua; an id whose job is gone is skipped and
     * the wait goes on within the same timeout). Declared as 1.x declared it.
     *
     * @param string|int       $topic   any non-empty string (an int is its decimal string)
     * @param int|float|string $timeout seconds, fractions allowed (a numeric string too); 0 waits forever
     * @return Message|false the job, or false when the timeout passed
     * @throws InvalidArgumentException on a bad topic or timeout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bPop($topic, $timeout)
    {
        $topic = Validator::name('topic', $topic);
        $timeout = Validator::timeout(Validator::legacySeconds('timeout', $timeout));
        $queue = $this->keys->readyQueue($topic);
        return $this->waitFor($timeout, function (float $wait) use ($queue): Message|false|null {
            $reply = $this->connection->blocking('BRPOP', [$queue], $wait);
            if ($reply === null) {
                return null;
            }
            $call = Ops::take($this->keys, Ops::poppedId($reply));
            return Ops::message($this->connection->script(...$call), Scripts::TAKE);
        });
    }

    /**
     * Cancels a job: a waiting job is never delivered; a job already in its
     * ready queue loses its data, so pop skips it. A job already popped
     * cannot be recalled. Declared as 1.x declared it.
     *
     * @param string|int $id any non-empty string (an int is its decimal string)
     *
     * @return bool true when something was cancelled, false when the id was
     *              unknown (never pushed, already popped, or expired)
     * @throws InvalidArgumentException on a bad id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function remove($id)
    {
        $call = Ops::remove($this->keys, Validator::name('id', $id));
        return Ops::flag($this->connection->script(...$call), Scripts::REMOVE);
    }

    /**
     * Takes the next ready job of a topic, if any, without waiting, and
     * keeps it reserved for this worker for $ttr seconds (at least once).
     *
     * The job stays in Redis, invisible to other consumers, until ack()
     * (done), release() (try again later) or bury() (give up) ends the
     * reservation. If none of them comes within $ttr, a Delayer 2 server
     * counts a failed attempt and delivers the job again (after its backoff,
     * or to dead letters past its max_attempts): a worker that dies loses
     * nothing. Choose $ttr above the longest time a job may take: a job
     * still being worked on when its ttr passes is delivered again.
     * Reserving a job takes its expiry off: it is kept until acked or
     * purged.
     *
     * @param int|float $ttr time-to-run in seconds: more than 0, at most
     *                       315360000, rounded to the millisecond (at least 1 ms)
     * @return ReservedMessage|false the job, or false when none is ready
     * @throws InvalidArgumentException on a bad topic or ttr
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function reserve(string $topic, int|float $ttr): ReservedMessage|false
    {
        $topic = Validator::name('topic', $topic);
        return $this->runReserve($topic, Validator::ttrMs($ttr));
    }

    /**
     * reserve(), waiting up to $timeout seconds for a job.
     *
     * It waits with BLMOVE from the ready queue onto itself, which takes
     * nothing (a worker dying mid-wait cannot lose an id, as it could
     * between a BRPOP and the script recording the reservation), then runs
     * reserve.lua; when another worker was quicker, or the ids were stale,
     * it waits again within the same timeout. Timeouts are bPop()'s.
     *
     * @param int|float $ttr     as reserve()
     * @param int|float $timeout seconds, fractions allowed; 0 waits forever
     * @return ReservedMessage|false the job, or false when the timeout passed
     * @throws InvalidArgumentException on a bad topic, ttr or timeout
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bReserve(string $topic, int|float $ttr, int|float $timeout = 0): ReservedMessage|false
    {
        $topic = Validator::name('topic', $topic);
        $ttrMs = Validator::ttrMs($ttr);
        $timeout = Validator::timeout($timeout);
        $queue = $this->keys->readyQueue($topic);
        return $this->waitFor($timeout, function (float $wait) use ($queue, $topic, $ttrMs): ReservedMessage|false|null {
            if ($this->connection->blocking('BLMOVE', [$queue, $queue, 'RIGHT', 'RIGHT'], $wait) === null) {
                return null;
            }
            return $this->runReserve($topic, $ttrMs);
        });
    }

    /**
     * Acks finished reservations and reserves up to $n more jobs of a topic,
     * in one call (one round trip; reserve.lua's batch mode): a worker's
     * "done with these, give me the next". The acks come first and act as
     * {@see ack()} does; the jobs are reserved as {@see reserve()} reserves
     * one, in ready order. Does not wait.
     *
     *     [, $jobs] = $client->reserveMany('mail', 60, 1);
     *     // ... run $jobs[0] ...
     *     [$acked, $jobs] = $client->reserveMany('mail', 60, 1, [$jobs[0]]);
     *
     * If the call fails on a lost connection, it may still have run: the
     * acks sent again return false the second time, and jobs it reserved
     * come back after their ttr (at least once).
     *
     * @param int|float                    $ttr  as reserve()
     * @param int                          $n    the most jobs to reserve, 0 (acks only) to 1000
     * @param list<ReservedMessage|string> $acks reservations to end with success first (at
     *                                           most 1000): a ReservedMessage (that
     *                                           reservation), or an id (its current one)
     * @return array{0: list<bool>, 1: list<ReservedMessage>} one flag per ack, in
     *         order (as ack()'s result), and 0 to $n jobs
     * @throws InvalidArgumentException on a bad topic, ttr, n or ack (nothing is sent to Redis)
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function reserveMany(string $topic, int|float $ttr, int $n, array $acks = []): array
    {
        $topic = Validator::name('topic', $topic);
        $ttrMs = Validator::ttrMs($ttr);
        if ($n < 0 || $n > Scripts::RESERVE_MAX_JOBS) {
            throw new InvalidArgumentException(sprintf('n must be from 0 to %d, got %d', Scripts::RESERVE_MAX_JOBS, $n));
        }
        if (\count($acks) > Scripts::RESERVE_MAX_JOBS) {
            throw new InvalidArgumentException(sprintf('at most %d acks per call, got %d', Scripts::RESERVE_MAX_JOBS, \count($acks)));
        }
        $pairs = [];
        foreach ($acks as $key => $job) {
            if (!$job instanceof ReservedMessage && !\is_string($job) && !\is_int($job)) {
                throw new InvalidArgumentException(sprintf(
                    'acks[%s] must be a ReservedMessage or a job id, got %s',
                    var_export($key, true),
                    get_debug_type($job)
                ));
            }
            $pairs[] = Ops::reservation($job, null);
        }
        $call = Ops::reserveMany($this->keys, $topic, $ttrMs, $n, $pairs);
        return Ops::reservedMany($this->connection->script(...$call), \count($pairs), $n);
    }

    /**
     * Ends a reservation with success: the job is deleted.
     *
     * Given the ReservedMessage, it acts on that reservation only (its
     * receipt): a worker that overran its ttr, whose job was meanwhile
     * handed to another worker, gets false and changes nothing. Given an id,
     * it acts on the reservation named by $receipt, or on whichever is
     * current when $receipt is null. An ack after the deadline still counts
     * while the server has not yet taken the job back.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @return bool true when the reservation was held (the job is deleted),
     *              false when it was not (already ended, expired and handed
     *              out again, unknown id): nothing changed
     * @throws InvalidArgumentException on a bad id or receipt
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function ack(string|ReservedMessage $job, ?string $receipt = null): bool
    {
        [$id, $receipt] = Ops::reservation($job, $receipt);
        return Ops::flag($this->connection->script(...Ops::ack($this->keys, $id, $receipt)), Scripts::ACK);
    }

    /**
     * Extends a reservation a worker still needs: its deadline becomes
     * $ttr seconds from now (Redis's clock). The deadline is set, not added
     * to, so a shorter $ttr brings it in. The attempt count does not change:
     * a touch lengthens this attempt, it does not start another. Which
     * reservation: as {@see ack()}. A ReservedMessage is immutable: its
     * $deadline stays the one reserve() gave; the new one is returned.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param int|float              $ttr     as reserve(): more than 0, at most
     *                                        315360000, rounded to the millisecond
     *                                        (at least 1 ms)
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @return float|false the new deadline in Unix seconds (ms precision), or
     *                     false when the reservation was not held (already
     *                     ended, expired and handed out again, unknown id):
     *                     nothing changed
     * @throws InvalidArgumentException on a bad id, receipt or ttr
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function touch(string|ReservedMessage $job, int|float $ttr, ?string $receipt = null): float|false
    {
        [$id, $receipt] = Ops::reservation($job, $receipt);
        $call = Ops::touch($this->keys, $id, $receipt, Validator::ttrMs($ttr));
        return Ops::timeOrFalse($this->connection->script(...$call), Scripts::TOUCH);
    }

    /**
     * Ends a reservation as a failed attempt: the job goes back to the pool,
     * due after $delay seconds, or after its backoff when $delay is null;
     * to its topic's dead letters instead when its attempts reached
     * max_attempts. Which reservation: as {@see ack()}.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param int|float|null         $delay   seconds, 0 to 315360000 (rounded to the
     *                                        millisecond); null: the job's backoff
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $error   why the attempt failed, kept on the job
     *                                        (its first 1000 bytes, shown by dead
     *                                        letters and job lookups) until it is
     *                                        pushed again or acked; null: nothing
     * @return bool true when the reservation was held (the job is scheduled
     *              again or dead), false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id, receipt or delay
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function release(
        string|ReservedMessage $job,
        int|float|null $delay = null,
        ?string $receipt = null,
        ?string $error = null,
    ): bool {
        [$id, $receipt] = Ops::reservation($job, $receipt);
        $action = $delay === null ? 'backoff' : (string) Validator::delayMs($delay);
        return Ops::released($this->connection->script(...Ops::release($this->keys, $id, $receipt, $action, $error ?? '')));
    }

    /**
     * Ends a reservation by giving up: the job goes straight to its topic's
     * dead letters (reason "buried"), whatever its attempts, and stays there
     * until requeueDead() or purgeDead(). Which reservation: as {@see ack()}.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @param string|null            $error   why, kept on the job as release()'s
     * @return bool true when the reservation was held (the job is dead),
     *              false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id or receipt
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function bury(string|ReservedMessage $job, ?string $receipt = null, ?string $error = null): bool
    {
        [$id, $receipt] = Ops::reservation($job, $receipt);
        return Ops::released($this->connection->script(...Ops::release($this->keys, $id, $receipt, 'bury', $error ?? '')));
    }

    /**
     * Moves the due time of a job still waiting in the pool to $delay
     * seconds from now (Redis's clock); its expiry moves by as much, so it
     * keeps the same lifetime after its due time. Never creates or
     * resurrects a job: a job that is ready, reserved, dead, gone or unknown
     * is left alone.
     *
     * @param int|float $delay seconds, 0 to 315360000, rounded to the millisecond
     * @return float|false the new due time in Unix seconds (ms precision), or
     *                     false when the job is not waiting
     * @throws InvalidArgumentException on a bad id or delay
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function reschedule(string $id, int|float $delay): float|false
    {
        $call = Ops::reschedule($this->keys, Validator::name('id', $id), Validator::delayMs($delay));
        return Ops::timeOrFalse($this->connection->script(...$call), Scripts::RESCHEDULE);
    }

    /**
     * Lists a topic's dead letters (jobs buried, or out of attempts), newest
     * first. Entries whose job was removed or pushed again since it died are
     * skipped, so a page may hold fewer than $count.
     *
     * @param int $start how many of the newest to skip, 0 or more
     * @param int $count how many to read, 1 to 1000 (one call must not hold
     *                   Redis for long)
     * @return list<DeadLetter>
     * @throws InvalidArgumentException on a bad topic, start or count
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function deadLetters(string $topic, int $start = 0, int $count = 100): array
    {
        $topic = Validator::name('topic', $topic);
        Validator::deadRange($start, $count);
        return Ops::deadLetters($this->connection->script(...Ops::deadList($this->keys, $topic, $start, $count)));
    }

    /**
     * Puts dead letters back into the pool, due now, with their attempts
     * reset to 0 (a job whose bug was fixed gets its full max_attempts
     * again).
     *
     * @param list<string>|null $ids the ids to re-queue, or null for the
     *                               whole list (taken 1000 per call, oldest first)
     * @return int how many jobs were re-queued (ids not on the list, or whose
     *             job was removed or pushed again since, are not counted)
     * @throws InvalidArgumentException on a bad topic or id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function requeueDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'requeue');
    }

    /**
     * Deletes dead letters for good (their jobs' data included).
     *
     * @param list<string>|null $ids the ids to purge, or null for the whole
     *                               list (taken 1000 per call, oldest first)
     * @return int how many jobs were deleted (ids not on the list, or whose
     *             job was removed or pushed again since, are not counted)
     * @throws InvalidArgumentException on a bad topic or id
     * @throws ConnectionException      when Redis cannot be reached or the connection was lost
     * @throws RedisErrorException      when Redis refused the command
     * @throws ProtocolException        on a reply the protocol does not allow
     */
    public function purgeDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'purge');
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
        $copy->connection = $this->connection->copy();
        $copy->keys = $this->keys;
        $copy->durable = $this->durable;
        $copy->host = $this->host;
        $copy->port = $this->port;
        $copy->database = $this->database;
        $copy->password = $this->password;
        unset($copy->_driver); // read through __get(), as the constructor does
        return $copy;
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
     * push.lua for one job of Ops::job().
     *
     * @param array{0: list<string>, 1: list<string>} $job
     */
    private function pushOne(array $job, bool $ifAbsent): bool
    {
        $due = PushReply::read($this->connection->script(...Ops::push($this->keys, $job, $ifAbsent)), $job[1][0], Scripts::PUSH);
        if ($due instanceof Taken) {
            throw new IdTakenException([$due], [null]);
        }
        $this->awaitReplica(1);
        return true;
    }

    /**
     * With the durable option: WAIT for a replica to have the writes just
     * made on this connection.
     *
     * @throws NotReplicatedException when none did in time
     */
    private function awaitReplica(int $jobs): void
    {
        if ($this->durable !== null && $jobs > 0 && $this->connection->waitForReplica($this->durable) < 1) {
            throw new NotReplicatedException($jobs, $this->durable);
        }
    }

    /** reserve.lua for a checked topic and ttr. */
    private function runReserve(string $topic, int $ttrMs): ReservedMessage|false
    {
        return Ops::reserved($this->connection->script(...Ops::reserve($this->keys, $topic, $ttrMs)));
    }

    /**
     * dead.lua's requeue or purge: the ids in calls of at most 1000, or the
     * whole list in calls of 1000 until one takes fewer (the list is empty).
     *
     * @param array<mixed>|null  $ids
     * @param 'requeue'|'purge' $action
     */
    private function dead(string $topic, ?array $ids, string $action): int
    {
        $topic = Validator::name('topic', $topic);
        $done = 0;
        if ($ids !== null) {
            $ids = array_values(array_unique(Validator::ids($ids)));
            foreach (array_chunk($ids, Scripts::DEAD_MAX_PER_CALL) as $batch) {
                [$n] = Ops::deadCounts($this->connection->script(...Ops::deadAction($this->keys, $topic, $action, $batch)));
                $done += $n;
            }
            return $done;
        }
        do {
            [$n, $taken] = Ops::deadCounts($this->connection->script(...Ops::deadAction($this->keys, $topic, $action, null)));
            $done += $n;
        } while ($taken >= Scripts::DEAD_MAX_PER_CALL);
        return $done;
    }

    /**
     * The wait of bPop() and bReserve(): calls $attempt with the time left
     * (0 = forever) until it returns a job, or the timeout has passed.
     *
     * $attempt blocks up to the time given, then returns the job; false when
     * it woke but found nothing usable (a stale id, another worker was
     * quicker): the wait goes on within the same timeout; or null when its
     * wait timed out. A remainder under 1 ms is passed as 1 ms, never as 0
     * (which would mean forever).
     *
     * @template T of object
     * @param float $timeout seconds, already validated; 0 waits forever
     * @param \Closure(float): (T|false|null) $attempt
     * @return T|false
     */
    private function waitFor(float $timeout, \Closure $attempt): object|false
    {
        $forever = $timeout == 0.0;
        $deadline = self::now() + $timeout;
        while (true) {
            $wait = 0.0;
            if (!$forever) {
                $wait = $deadline - self::now();
                if ($wait <= 0) {
                    return false;
                }
                // under 1 ms is sent as 1 ms: "0" would mean forever
                $wait = max($wait, 0.001);
            }
            $result = $attempt($wait);
            if ($result === null) {
                if ($forever) {
                    continue;
                }
                return false;
            }
            if ($result !== false) {
                return $result;
            }
        }
    }

    private static function now(): float
    {
        return hrtime(true) / 1e9;
    }
}
