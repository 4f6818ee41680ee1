<?php

declare(strict_types=1);

namespace Delayer;

use Delayer\Exception\ConfigException;
use Delayer\Exception\ConnectionException;
use Delayer\Exception\IdTakenException;
use Delayer\Exception\InvalidArgumentException;

/**
 * Delayer 2 client: push delayed jobs, pop or wait for due ones, cancel them;
 * or, at least once, reserve them and ack, release or bury them.
 *
 * A drop-in replacement for mix/delayer-client's Delayer\Client (see
 * sdk-php/README.md for every difference). It speaks docs/PROTOCOL.md: every
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
 * `ifAbsent: true` ({@see push()}).
 *
 * One Client holds one Redis connection, opened by the constructor; it is not
 * meant to be shared between processes (fork after connecting). A call that
 * loses it (Redis restarted, the network dropped) raises ConnectionException,
 * and the next call connects again: a worker catches the exception, waits a
 * little and goes on (sdk-php/examples/worker.php).
 */
class Client
{
    /** How long a ready job waits for a consumer by default: 7 days, in seconds. */
    public const DEFAULT_READY_MAX_LIFETIME = 604800;

    /** Default connect and read timeout, in seconds. */
    public const DEFAULT_TIMEOUT = 5.0;

    /** How many push_many.lua calls pushMany() sends per pipeline. */
    private const CALLS_PER_PIPELINE = 10;

    /** deadLetters() caps its start here: past any list's length, exact in Lua's doubles. */
    private const MAX_LIST_INDEX = 1 << 50;

    private const CONFIG_KEYS = ['url', 'host', 'port', 'database', 'username', 'password', 'tls', 'prefix', 'timeout'];

    /** The stream-context options of the tls option (PHP's ssl context names). */
    private const TLS_KEYS = ['cafile', 'local_cert', 'local_pk'];

    private readonly Connection $connection;

    private readonly Keys $keys;

    /**
     * Connects to Redis (and authenticates, and selects the database).
     *
     * Either url, or host / port / database (not both).
     *
     * @param array{url?: string, host?: string, port?: int|string, database?: int|string, username?: ?string, password?: ?string, tls?: array{cafile?: string, local_cert?: string, local_pk?: string}, prefix?: string, timeout?: int|float} $config
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
     * @throws ConfigException     on an unknown key or a bad value
     * @throws ConnectionException when Redis cannot be reached, refuses the
     *                             credentials, or refuses the database
     */
    public function __construct(#[\SensitiveParameter] array $config = [])
    {
        foreach (array_keys($config) as $key) {
            if (!\in_array($key, self::CONFIG_KEYS, true)) {
                throw new ConfigException(sprintf(
                    'unknown Delayer\Client option %s (expected one of %s)',
                    var_export($key, true),
                    implode(', ', self::CONFIG_KEYS)
                ));
            }
        }
        $url = self::configString($config, 'url', '', true);
        $username = self::configString($config, 'username', '', true);
        $password = self::configString($config, 'password', '', true);
        $tls = self::tlsOptions($config['tls'] ?? []);
        $secrets = $password === '' ? [] : [$password];
        $context = null;
        if ($url === '') {
            $host = self::configString($config, 'host', '127.0.0.1', false);
            $port = self::configInt($config, 'port', 6379, 1, 65535);
            $database = self::configInt($config, 'database', 0, 0, PHP_INT_MAX);
            $where = str_starts_with($host, '/') ? $host : "{$host}:{$port}";
            $port = str_starts_with($host, '/') ? 0 : $port;
        } else {
            foreach (['host', 'port', 'database'] as $key) {
                if (($config[$key] ?? null) !== null) {
                    throw new ConfigException("option {$key}: set either url or host/port/database, not both");
                }
            }
            $parsed = RedisUrl::parse($url);
            if ($parsed === null) {
                throw new ConfigException('option url: not a redis://, rediss:// or unix:// URL');
            }
            if ($parsed->password !== null) {
                $secrets[] = $parsed->password;
            }
            $username = $username !== '' ? $username : (string) $parsed->username;
            $password = $password !== '' ? $password : (string) $parsed->password;
            $database = $parsed->database;
            if ($parsed->socket !== null) {
                $host = $where = $parsed->socket;
                $port = 0;
            } else {
                $bare = (string) $parsed->host;
                $host = ($parsed->tls ? 'tls://' : '') . (str_contains($bare, ':') ? "[{$bare}]" : $bare);
                $port = $parsed->port;
                $where = (str_contains($bare, ':') ? "[{$bare}]" : $bare) . ":{$parsed->port}";
                // Certificates matter only for rediss:// (as in the Rust SDK).
                $context = $parsed->tls
                    ? ['stream' => $tls + ['verify_peer' => true, 'verify_peer_name' => true, 'peer_name' => $bare]]
                    : null;
            }
        }
        $this->keys = new Keys(self::configString($config, 'prefix', Keys::DEFAULT_PREFIX, true));
        $timeout = $config['timeout'] ?? self::DEFAULT_TIMEOUT;
        if (!(\is_int($timeout) || \is_float($timeout)) || !is_finite((float) $timeout) || $timeout <= 0) {
            throw new ConfigException('option timeout must be a positive number of seconds');
        }
        if ($username !== '' && $password === '') {
            throw new ConfigException('option username needs a password');
        }
        $this->connection = new Connection(
            $host,
            $port,
            $where,
            $context,
            $username === '' ? null : $username,
            $password === '' ? null : $password,
            $database,
            (float) $timeout,
            $secrets,
        );
        $this->connection->open();
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

    /** The key names this client uses (built from its prefix). */
    public function getKeys(): Keys
    {
        return $this->keys;
    }

    /**
     * Schedules a job: it reaches its topic's ready queue $delay seconds
     * from now (Redis's clock).
     *
     * Ids are global across topics (the Delayer 1.x key layout): pushing
     * an id that a job already has, on any topic, replaces that job (its
     * topic, data and due time), as Delayer 1.x does; push("sms", "42", ...)
     * replaces a waiting "42" of topic "close_order". With `ifAbsent: true`
     * nothing is written when the id is taken and IdTakenException names the
     * job holding it (its topic, and its due time while it waits).
     *
     * Two shapes, told apart by the first argument:
     *
     *     push(Message $message, int|float $delay, int $readyMaxLifetime = 604800, bool ifAbsent: false): bool
     *     push(string $topic, string $id, int|float $delay, string $body = '', bool ifAbsent: false): bool
     *
     * The first is mix/delayer-client's; the second is a short form (its
     * ready_max_lifetime is the default, 7 days). Pass ifAbsent by name:
     * `$client->push($message, 60, ifAbsent: true)`.
     *
     * $delay is in seconds, 0 to 315360000, fractions allowed (rounded to the
     * millisecond). $readyMaxLifetime is how long, in whole seconds (1 to
     * 315360000), a due job waits for a consumer before it expires.
     *
     * @param Message|string       $messageOrTopic          the Message, or the topic (short form)
     * @param int|float|string     $delayOrId               the delay, or the id (short form)
     * @param int|float|null       $readyMaxLifetimeOrDelay ready_max_lifetime (null: 7 days), or the delay (short form)
     * @param string|null          $body                    the body (short form only; null: "")
     * @param bool                 $ifAbsent                true: only if no job has the id, else
     *                                                      IdTakenException; false: replace (1.x)
     * @return bool true (failures raise exceptions; never false)
     * @throws InvalidArgumentException on bad input (nothing is sent to Redis)
     * @throws IdTakenException         with ifAbsent, when the id is taken (nothing was written)
     * @throws ConnectionException      on a connection or Redis error
     */
    public function push(
        Message|string $messageOrTopic,
        int|float|string $delayOrId,
        int|float|null $readyMaxLifetimeOrDelay = null,
        ?string $body = null,
        bool $ifAbsent = false,
    ): bool {
        if ($messageOrTopic instanceof Message) {
            if ($body !== null) {
                throw new InvalidArgumentException('push(Message, delay, readyMaxLifetime) takes no body: the body is in the Message');
            }
            if (\is_string($delayOrId)) {
                throw new InvalidArgumentException('push(Message, delay, ...): delay must be a number of seconds, got a string');
            }
            $job = $this->prepare($messageOrTopic, $delayOrId, $readyMaxLifetimeOrDelay ?? self::DEFAULT_READY_MAX_LIFETIME);
        } else {
            if ($readyMaxLifetimeOrDelay === null) {
                throw new InvalidArgumentException('push(topic, id, delay, body = \'\'): the delay is missing');
            }
            if (!\is_string($delayOrId)) {
                throw new InvalidArgumentException('push(topic, id, delay, ...): id must be a string');
            }
            $job = $this->prepare(
                Message::create($delayOrId, $messageOrTopic, $body ?? ''),
                $readyMaxLifetimeOrDelay,
                self::DEFAULT_READY_MAX_LIFETIME
            );
        }
        $policy = $ifAbsent ? Scripts::IF_ABSENT : Scripts::REPLACE;
        $reply = $this->connection->script(Scripts::PUSH, $job[0], [...$job[1], $policy, $this->keys->wake()]);
        $due = PushReply::read($reply, $job[1][0], Scripts::PUSH);
        if ($due instanceof Taken) {
            throw new IdTakenException([$due], [null]);
        }
        return true;
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
     * @throws ConnectionException      on a connection or Redis error
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
                $jobs[] = $this->prepare($item->message, $item->delay, $item->readyMaxLifetime);
            } catch (InvalidArgumentException $e) {
                throw new InvalidArgumentException(
                    sprintf('pushMany item %s: %s', var_export($index, true), $e->getMessage()),
                    0,
                    $e
                );
            }
        }

        // push_many.lua: KEYS pool; ARGV bucket prefix, policy, wake channel, then push.lua's ARGV of each job
        $calls = [];
        foreach (array_chunk($jobs, Scripts::PUSH_MANY_MAX_JOBS) as $chunk) {
            $argv = [$this->keys->bucketPrefix(), $ifAbsent ? Scripts::IF_ABSENT : Scripts::REPLACE, $this->keys->wake()];
            foreach ($chunk as [, $jobArgv]) {
                array_push($argv, ...$jobArgv);
            }
            $calls[] = [[$this->keys->pool()], $argv];
        }
        $dues = [];
        $taken = [];
        foreach (array_chunk($calls, self::CALLS_PER_PIPELINE) as $pipeline) {
            foreach ($this->connection->pipelined(Scripts::PUSH_MANY, $pipeline) as $i => $entries) {
                $expected = intdiv(\count($pipeline[$i][1]) - Scripts::PUSH_MANY_HEAD, Scripts::PUSH_MANY_STRIDE);
                if (!\is_array($entries) || \count($entries) !== $expected) {
                    throw new ConnectionException(
                        'Redis error running push_many.lua: unexpected reply ' . get_debug_type($entries)
                    );
                }
                foreach (array_values($entries) as $entry) {
                    $due = PushReply::read($entry, $jobs[\count($dues)][1][0], Scripts::PUSH_MANY);
                    if ($due instanceof Taken) {
                        $taken[] = $due;
                        $due = null;
                    }
                    $dues[] = $due;
                }
            }
        }
        if ($taken !== []) {
            throw new IdTakenException($taken, $dues);
        }
        return \count($jobs);
    }

    /**
     * Takes the next ready job of a topic, if any, without waiting. The job
     * is deleted from Redis as it is handed out (at most once). Ids whose
     * job expired or was removed are skipped.
     *
     * @return Message|false the job, or false when none is ready
     * @throws InvalidArgumentException on a bad topic
     * @throws ConnectionException      on a connection or Redis error
     */
    public function pop(string $topic): Message|false
    {
        Validator::name('topic', $topic);
        $job = $this->connection->script(
            Scripts::POP,
            [$this->keys->readyQueue($topic), $this->keys->malformed(), $this->keys->pool(), $this->keys->reserved()],
            [$this->keys->bucketPrefix()]
        );
        return self::toMessage($job, Scripts::POP);
    }

    /**
     * Takes the next ready job of a topic, waiting up to $timeout seconds
     * for one (BRPOP, then take.lua; an id whose job is gone is skipped and
     * the wait goes on within the same timeout).
     *
     * @param int|float $timeout seconds, fractions allowed; 0 waits forever
     * @return Message|false the job, or false when the timeout passed
     * @throws InvalidArgumentException on a bad topic or timeout
     * @throws ConnectionException      on a connection or Redis error
     */
    public function bPop(string $topic, int|float $timeout): Message|false
    {
        Validator::name('topic', $topic);
        $timeout = Validator::timeout($timeout);
        $queue = $this->keys->readyQueue($topic);
        return $this->waitFor($timeout, function (float $wait) use ($queue): Message|false|null {
            $reply = $this->connection->blocking('BRPOP', [$queue], $wait);
            if ($reply === null) {
                return null;
            }
            if (!\is_array($reply) || \count($reply) !== 2 || !\is_string($reply[1] ?? null)) {
                throw new ConnectionException('Redis error running BRPOP: unexpected reply ' . get_debug_type($reply));
            }
            $id = $reply[1];
            $job = $this->connection->script(
                Scripts::TAKE,
                [$this->keys->bucket($id), $this->keys->malformed(), $this->keys->pool(), $this->keys->reserved()],
                [$id]
            );
            return self::toMessage($job, Scripts::TAKE);
        });
    }

    /**
     * Cancels a job: a waiting job is never delivered; a job already in its
     * ready queue loses its data, so pop skips it. A job already popped
     * cannot be recalled.
     *
     * @return bool true when something was cancelled, false when the id was
     *              unknown (never pushed, already popped, or expired)
     * @throws InvalidArgumentException on a bad id
     * @throws ConnectionException      on a connection or Redis error
     */
    public function remove(string $id): bool
    {
        Validator::name('id', $id);
        $result = $this->connection->script(
            Scripts::REMOVE,
            [$this->keys->pool(), $this->keys->bucket($id)],
            [$id]
        );
        return (int) $result === 1;
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function reserve(string $topic, int|float $ttr): ReservedMessage|false
    {
        Validator::name('topic', $topic);
        $ttrMs = Validator::ttrMs($ttr);
        return $this->runReserve($topic, $ttrMs);
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function bReserve(string $topic, int|float $ttr, int|float $timeout = 0): ReservedMessage|false
    {
        Validator::name('topic', $topic);
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function ack(string|ReservedMessage $job, ?string $receipt = null): bool
    {
        [$id, $receipt] = self::reservation($job, $receipt);
        $result = $this->connection->script(
            Scripts::ACK,
            [$this->keys->reserved(), $this->keys->bucket($id), $this->keys->pool()],
            [$id, $receipt]
        );
        if (!\is_int($result)) {
            throw new ConnectionException('Redis error running ack.lua: unexpected reply ' . get_debug_type($result));
        }
        return $result === 1;
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function touch(string|ReservedMessage $job, int|float $ttr, ?string $receipt = null): float|false
    {
        [$id, $receipt] = self::reservation($job, $receipt);
        $ttrMs = Validator::ttrMs($ttr);
        $deadline = $this->connection->script(
            Scripts::TOUCH,
            [$this->keys->reserved(), $this->keys->bucket($id), $this->keys->pool()],
            [$id, $receipt, (string) $ttrMs]
        );
        if ($deadline === false || $deadline === null) {
            return false;
        }
        return self::seconds($deadline, Scripts::TOUCH);
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
     * @return bool true when the reservation was held (the job is scheduled
     *              again or dead), false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id, receipt or delay
     * @throws ConnectionException      on a connection or Redis error
     */
    public function release(string|ReservedMessage $job, int|float|null $delay = null, ?string $receipt = null): bool
    {
        [$id, $receipt] = self::reservation($job, $receipt);
        $action = $delay === null ? 'backoff' : (string) Validator::delayMs($delay);
        return $this->endReservation($id, $receipt, $action);
    }

    /**
     * Ends a reservation by giving up: the job goes straight to its topic's
     * dead letters (reason "buried"), whatever its attempts, and stays there
     * until requeueDead() or purgeDead(). Which reservation: as {@see ack()}.
     *
     * @param string|ReservedMessage $job     the reserved job, or its id
     * @param string|null            $receipt with an id only: the reservation's receipt
     * @return bool true when the reservation was held (the job is dead),
     *              false when it was not: nothing changed
     * @throws InvalidArgumentException on a bad id or receipt
     * @throws ConnectionException      on a connection or Redis error
     */
    public function bury(string|ReservedMessage $job, ?string $receipt = null): bool
    {
        [$id, $receipt] = self::reservation($job, $receipt);
        return $this->endReservation($id, $receipt, 'bury');
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function reschedule(string $id, int|float $delay): float|false
    {
        Validator::name('id', $id);
        $delayMs = Validator::delayMs($delay);
        $due = $this->connection->script(
            Scripts::RESCHEDULE,
            [$this->keys->pool(), $this->keys->bucket($id)],
            [$id, (string) $delayMs, $this->keys->wake()]
        );
        if ($due === false || $due === null) {
            return false;
        }
        return self::seconds($due, Scripts::RESCHEDULE);
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function deadLetters(string $topic, int $start = 0, int $count = 100): array
    {
        Validator::name('topic', $topic);
        Validator::deadRange($start, $count);
        // Beyond any list's length either way; keeps start + count exact in
        // Lua's doubles.
        $start = min($start, self::MAX_LIST_INDEX);
        $entries = $this->connection->script(
            Scripts::DEAD,
            [$this->keys->dead($topic), $this->keys->pool()],
            [$this->keys->bucketPrefix(), 'list', (string) $start, (string) $count]
        );
        if (!\is_array($entries)) {
            throw new ConnectionException('Redis error running dead.lua: unexpected reply ' . get_debug_type($entries));
        }
        $letters = [];
        foreach ($entries as $entry) {
            if (!\is_array($entry) || \count($entry) !== 6 || !\is_int($entry[3])) {
                throw new ConnectionException('Redis error running dead.lua: unexpected entry ' . get_debug_type($entry));
            }
            [$id, $topicOf, $body, $attempts, $reason, $deadAt] = $entry;
            $letters[] = new DeadLetter(
                (string) $id,
                (string) $topicOf,
                (string) $body,
                $attempts,
                (string) $reason,
                // dead_at is written with dead_reason; a hand-edited bucket without it reads as 0
                \is_string($deadAt) && is_numeric($deadAt) ? (float) $deadAt : 0.0
            );
        }
        return $letters;
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
     * @throws ConnectionException      on a connection or Redis error
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
     * @throws ConnectionException      on a connection or Redis error
     */
    public function purgeDead(string $topic, ?array $ids = null): int
    {
        return $this->dead($topic, $ids, 'purge');
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

    /**
     * Validates one job and builds push.lua's KEYS and ARGV[1..9] (the job;
     * the policy and wake channel are added by the caller).
     *
     * @return array{0: list<string>, 1: list<string>}
     * @throws InvalidArgumentException
     */
    private function prepare(Message $message, int|float $delay, int|float $readyMaxLifetime): array
    {
        $id = Validator::name('id', $message->id);
        $topic = Validator::name('topic', $message->topic);
        $delayMs = Validator::delayMs($delay);
        $lifetimeMs = Validator::lifetimeMs(self::wholeSeconds($readyMaxLifetime));
        // Retry settings not set go as "": push.lua then writes nothing, and
        // the bucket stays exactly Delayer 1.x's.
        $maxAttempts = $message->maxAttempts === null ? '' : (string) Validator::maxAttempts($message->maxAttempts);
        $backoff = $message->backoff;
        return [
            [$this->keys->pool(), $this->keys->bucket($id)],
            [
                $id, $topic, $message->body, (string) $delayMs, (string) $lifetimeMs, $maxAttempts,
                $backoff?->kind ?? '', (string) ($backoff?->backoffMs ?? ''), (string) ($backoff?->backoffMaxMs ?? ''),
            ],
        ];
    }

    /** reserve.lua for a validated topic and ttr. */
    private function runReserve(string $topic, int $ttrMs): ReservedMessage|false
    {
        $job = $this->connection->script(
            Scripts::RESERVE,
            [
                $this->keys->readyQueue($topic), $this->keys->reserved(), $this->keys->malformed(),
                $this->keys->receiptSeq(), $this->keys->pool(),
            ],
            [$this->keys->bucketPrefix(), (string) $ttrMs]
        );
        if ($job === false || $job === null) {
            return false;
        }
        if (!\is_array($job) || \count($job) !== 7 || !\is_int($job[3]) || !\is_int($job[4])) {
            throw new ConnectionException('Redis error running reserve.lua: unexpected reply ' . get_debug_type($job));
        }
        [$id, $topicOf, $body, $attempts, $maxAttempts, $receipt, $deadline] = $job;
        return new ReservedMessage(
            (string) $id,
            (string) $topicOf,
            (string) $body,
            $attempts,
            $maxAttempts,
            (string) $receipt,
            self::seconds($deadline, Scripts::RESERVE)
        );
    }

    /**
     * The id and receipt ack / touch / release / bury send: a ReservedMessage's own
     * (its id came from Redis and is not checked again: a job pushed by a
     * Delayer 1.x client with an id we would refuse must still be ackable),
     * or a checked id with the receipt given, "" for the current reservation.
     *
     * @return array{0: string, 1: string}
     * @throws InvalidArgumentException
     */
    private static function reservation(string|ReservedMessage $job, ?string $receipt): array
    {
        if ($job instanceof ReservedMessage) {
            if ($receipt !== null) {
                throw new InvalidArgumentException('a ReservedMessage carries its receipt: pass a receipt only with an id');
            }
            return [$job->id, $job->receipt];
        }
        Validator::name('id', $job);
        if ($receipt === '') {
            throw new InvalidArgumentException('receipt must not be empty: pass null to act on the current reservation');
        }
        return [$job, $receipt ?? ''];
    }

    /** release.lua in "held" mode; true when the reservation was held. */
    private function endReservation(string $id, string $receipt, string $action): bool
    {
        $result = $this->connection->script(
            Scripts::RELEASE,
            [$this->keys->reserved(), $this->keys->pool(), $this->keys->malformed()],
            [$this->keys->prefix(), $action, 'held', $id, $receipt, $this->keys->wake()]
        );
        if ($result === false || $result === null) {
            return false;
        }
        if (!\is_string($result)) {
            throw new ConnectionException('Redis error running release.lua: unexpected reply ' . get_debug_type($result));
        }
        return true;
    }

    /**
     * dead.lua's requeue or purge: the ids in calls of at most 1000, or the
     * whole list in calls of 1000 until one takes fewer (the list is empty).
     *
     * @param array<mixed>|null  $ids
     * @param 'requeue'|'purge' $action
     * @throws InvalidArgumentException
     * @throws ConnectionException
     */
    private function dead(string $topic, ?array $ids, string $action): int
    {
        Validator::name('topic', $topic);
        $batches = null;
        if ($ids !== null) {
            $ids = array_values(array_unique(Validator::ids($ids)));
            $batches = array_chunk($ids, Scripts::DEAD_MAX_PER_CALL);
        }
        $keys = [$this->keys->dead($topic), $this->keys->pool()];
        $done = 0;
        if ($batches !== null) {
            foreach ($batches as $batch) {
                [$n] = $this->runDead($keys, [$this->keys->bucketPrefix(), $action, (string) \count($batch), ...$batch]);
                $done += $n;
            }
            return $done;
        }
        do {
            [$n, $taken] = $this->runDead($keys, [$this->keys->bucketPrefix(), $action, (string) Scripts::DEAD_MAX_PER_CALL]);
            $done += $n;
        } while ($taken >= Scripts::DEAD_MAX_PER_CALL);
        return $done;
    }

    /**
     * @param list<string> $keys
     * @param list<string> $argv
     * @return array{0: int, 1: int} done, taken
     */
    private function runDead(array $keys, array $argv): array
    {
        $result = $this->connection->script(Scripts::DEAD, $keys, $argv);
        if (!\is_array($result) || \count($result) !== 2 || !\is_int($result[0]) || !\is_int($result[1])) {
            throw new ConnectionException('Redis error running dead.lua: unexpected reply ' . get_debug_type($result));
        }
        return [$result[0], $result[1]];
    }

    /** A script's "s.mmm" time as Unix seconds. */
    private static function seconds(mixed $time, string $script): float
    {
        if (!\is_string($time) || !is_numeric($time)) {
            throw new ConnectionException("Redis error running {$script}.lua: unexpected time " . get_debug_type($time));
        }
        return (float) $time;
    }

    /** A whole number of seconds given as int or integral float. */
    private static function wholeSeconds(int|float $seconds): int
    {
        if (\is_float($seconds)) {
            if (!is_finite($seconds) || floor($seconds) !== $seconds || abs($seconds) > PHP_INT_MAX / 1000) {
                throw new InvalidArgumentException(sprintf(
                    'readyMaxLifetime must be a whole number of seconds, got %s',
                    var_export($seconds, true)
                ));
            }
            return (int) $seconds;
        }
        return $seconds;
    }

    /** Turns a script's [id, topic, body] (or nil) into a Message (or false). */
    private static function toMessage(mixed $job, string $script): Message|false
    {
        if ($job === false || $job === null) {
            return false;
        }
        if (!\is_array($job) || \count($job) !== 3) {
            throw new ConnectionException("Redis error running {$script}.lua: unexpected reply " . get_debug_type($job));
        }
        [$id, $topic, $body] = array_map(static fn ($v): string => \is_string($v) ? $v : (string) $v, $job);
        return Message::create($id, $topic, $body);
    }

    /**
     * Checks the tls option: cafile, local_cert and local_pk, readable files;
     * local_cert and local_pk together.
     *
     * @return array<string, string>
     * @throws ConfigException naming the bad key
     */
    private static function tlsOptions(mixed $tls): array
    {
        if (!\is_array($tls)) {
            throw new ConfigException('option tls must be an array (cafile, local_cert, local_pk), got ' . get_debug_type($tls));
        }
        foreach ($tls as $key => $file) {
            if (!\in_array($key, self::TLS_KEYS, true)) {
                throw new ConfigException(sprintf(
                    'unknown tls option %s (expected one of %s)',
                    var_export($key, true),
                    implode(', ', self::TLS_KEYS)
                ));
            }
            if (!\is_string($file) || $file === '') {
                throw new ConfigException("option tls.{$key} must be a file path, got " . get_debug_type($file));
            }
            if (!is_file($file) || !is_readable($file)) {
                throw new ConfigException("option tls.{$key}: cannot read {$file}");
            }
        }
        if (isset($tls['local_cert']) !== isset($tls['local_pk'])) {
            [$set, $missing] = isset($tls['local_cert']) ? ['local_cert', 'local_pk'] : ['local_pk', 'local_cert'];
            throw new ConfigException("option tls.{$set} needs tls.{$missing} too");
        }
        /** @var array<string, string> $tls */
        return $tls;
    }

    private static function now(): float
    {
        return hrtime(true) / 1e9;
    }

    /**
     * @param array<string, mixed> $config
     * @throws ConfigException
     */
    private static function configString(#[\SensitiveParameter] array $config, string $key, string $default, bool $allowEmpty): string
    {
        $value = $config[$key] ?? $default;
        if (!\is_string($value) || (!$allowEmpty && $value === '')) {
            throw new ConfigException(sprintf(
                'option %s must be a %sstring, got %s',
                $key,
                $allowEmpty ? '' : 'non-empty ',
                get_debug_type($value)
            ));
        }
        return $value;
    }

    /**
     * @param array<string, mixed> $config
     * @throws ConfigException
     */
    private static function configInt(#[\SensitiveParameter] array $config, string $key, int $default, int $min, int $max): int
    {
        $value = $config[$key] ?? $default;
        if (\is_string($value) && preg_match('/^\d{1,18}$/', $value) === 1) {
            $value = (int) $value;
        }
        if (!\is_int($value) || $value < $min || $value > $max) {
            throw new ConfigException(sprintf(
                'option %s must be an integer from %d to %d, got %s',
                $key,
                $min,
                $max,
                \is_scalar($value) ? var_export($value, true) : get_debug_type($value)
            ));
        }
        return $value;
    }
}
