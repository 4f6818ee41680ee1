"""The synchronous Delayer client, on redis-py."""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import Any, Dict, Iterable, List, Optional, Type, Union

import redis
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.retry import Retry

from . import _core, config, scripts
from .errors import InvalidArgument
from .keys import DEFAULT_PREFIX, Keys
from .models import DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, Job, Message, ReservedMessage, Taken

__all__ = ["Delayer"]

PathArg = Union[str, "os.PathLike[str]"]


def _no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


class Delayer:
    """A Delayer client: push delayed jobs, pop them when due, remove them.

    Two ways to consume: :meth:`pop` / :meth:`bpop` hand a job out at most
    once (it is deleted as it is handed out); :meth:`reserve` /
    :meth:`breserve` hand it out at least once (it stays reserved until
    :meth:`ack`, and comes back if the worker fails or dies).

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.Redis`` instead (it must not decode
    responses, and :meth:`close` leaves it open). Redis's own socket timeout,
    if the given client sets one, must exceed the longest :meth:`bpop` /
    :meth:`breserve` wait.

    Job ids are global across topics (the classic 1.x key layout): a push
    replaces any job with its id, whatever its topic, unless ``if_absent``.

    Every error is a :class:`delayer.DelayerError`: :class:`InvalidArgument`
    (nothing sent), :class:`ConnectionFailed`, :class:`ProtocolError`,
    :class:`IdTakenError` (``if_absent``).
    """

    def __init__(
        self,
        url: str = _core.DEFAULT_URL,
        prefix: str = DEFAULT_PREFIX,
        *,
        client: Optional["redis.Redis"] = None,
        username: Optional[str] = None,
        password: Optional[str] = None,
        tls_ca_file: Optional[PathArg] = None,
        tls_cert_file: Optional[PathArg] = None,
        tls_key_file: Optional[PathArg] = None,
    ) -> None:
        """Create a client for ``url`` (or ``client``) with key prefix ``prefix``.

        ``url`` is ``redis://[user:password@]host:port/db``, ``rediss://...``
        (TLS) or ``unix:///path/to/redis.sock`` (also ``redis+unix://``).
        ``username`` / ``password``, when given, override the URL's. With
        ``rediss://``, ``tls_ca_file`` (PEM) is the CA to trust instead of the
        system's, and ``tls_cert_file`` + ``tls_key_file`` a client
        certificate and its key (mutual TLS). These options are for ``url``
        only, not for ``client=``.
        """
        self._keys = Keys(_core.check_prefix(prefix))
        secrets: List[str] = []
        if client is None:
            made, secrets = _core.open_client(
                redis.Redis.from_url, _no_retry(), url, password, (tls_ca_file, tls_cert_file, tls_key_file)
            )
            client = made
            _core.set_credentials(client.connection_pool.connection_kwargs, username, password)
            self._owns_client = True
        else:
            _core.reject_url_options(username, password, tls_ca_file, tls_cert_file, tls_key_file)
            if not isinstance(client, redis.Redis):
                raise InvalidArgument(f"client must be a redis.Redis, not {type(client).__name__}")
            self._owns_client = False
        kwargs: Dict[str, Any] = dict(client.connection_pool.connection_kwargs)
        _core.check_binary(kwargs)
        where, more = _core.describe(kwargs)
        self._redis: "redis.Redis" = client
        self._where = where
        self._guard = _core.Guard(where, secrets + more)
        self._scripts: Dict[str, Script] = {name: client.register_script(scripts.source(name)) for name in scripts.NAMES}

    @classmethod
    def from_config(cls, path: Union[str, "os.PathLike[str]"]) -> "Delayer":
        """Create a client from the ``delayer.conf`` file the server uses.

        Reads ``[redis]`` url (or host, port, database), username, password,
        tls_ca_file, tls_cert_file, tls_key_file and ``[delayer]`` key_prefix;
        raises :class:`ConfigError` naming the file, line, section and key.
        """
        s = config.load(path)
        return cls(
            s.url if s.url is not None else _core.tcp_url(s.host, s.port, s.database),
            s.key_prefix,
            username=s.username,
            password=s.password,
            tls_ca_file=s.tls_ca_file,
            tls_cert_file=s.tls_cert_file,
            tls_key_file=s.tls_key_file,
        )

    @property
    def keys(self) -> Keys:
        """The key names this client uses."""
        return self._keys

    @property
    def redis(self) -> "redis.Redis":
        """The underlying redis-py client."""
        return self._redis

    def push(
        self,
        topic: str,
        id: str,
        delay: float,
        body: Union[bytes, str] = b"",
        ready_max_lifetime: int = DEFAULT_READY_MAX_LIFETIME,
        *,
        max_attempts: Optional[int] = None,
        backoff: Optional[Backoff] = None,
        if_absent: bool = False,
    ) -> float:
        """Schedule job ``id`` on ``topic`` in ``delay`` seconds; return its due time.

        ``delay`` is rounded to the nearest millisecond; ``body`` is bytes (a
        ``str`` is encoded as UTF-8). The job's data expires
        ``delay + ready_max_lifetime`` seconds from now. Returns the due time
        as Unix seconds by Redis's clock.

        **Ids are global across topics** (the classic 1.x key layout): by
        default a push replaces whatever job has the id, on any topic (pushing
        ``"42"`` on ``"sms"`` replaces a waiting ``"42"`` on
        ``"close_order"``). With ``if_absent=True`` nothing is written when
        the id is taken: :class:`IdTakenError` says which job holds it (its
        topic, and its due time while it waits).

        ``max_attempts`` (0 = no limit, at most 1,000,000) and ``backoff``
        matter only to :meth:`reserve`: how many reservations the job gets
        before it goes to dead letters, and how long it waits after a failed
        one. Left out, reserve uses 25 and exponential backoff from 1 s up to
        1 h, and the bucket stays exactly as Delayer 1.x writes it.
        """
        call = _core.push_call(
            self._keys, topic, id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent
        )
        with self._guard:
            reply = self._scripts[scripts.PUSH](keys=call.keys, args=call.args)
        return _core.parse_push(call, reply)

    def push_many(self, jobs: Iterable[Job], *, if_absent: bool = False) -> List[float]:
        """Push many jobs, pipelined; return their due times in order.

        Every job is validated before anything is sent. Jobs go by
        push_many.lua, 100 per call and 10 calls per round trip; the jobs of
        one call are atomic together, the batch as a whole is not (a failure
        may leave earlier jobs pushed).

        Ids are global across topics, and a job replaces any job with its id,
        as in :meth:`push`. With ``if_absent=True`` the jobs whose id is
        taken are not written, the others are; :class:`IdTakenError` then
        lists the taken ids (:attr:`~IdTakenError.taken`) and carries every
        job's due time in order (:attr:`~IdTakenError.due`, None for a taken
        one).
        """
        calls = _core.push_many_calls(self._keys, jobs, if_absent)
        dues: List[Union[float, Taken]] = []
        source = scripts.source(scripts.PUSH_MANY)
        sha = self._scripts[scripts.PUSH_MANY].sha
        with self._guard:
            for chunk in _core.chunks(calls):
                with self._redis.pipeline(transaction=False) as pipe:
                    # a no-op unless Redis lost the script (restart, SCRIPT FLUSH)
                    pipe.script_load(source)
                    for call in chunk:
                        pipe.evalsha(sha, len(call.keys), *call.keys, *call.args)
                    replies = pipe.execute()
                dues.extend(_core.parse_push_many(chunk, replies))
        return _core.pushed_all(dues)

    def pop(self, topic: str) -> Optional[Message]:
        """Take the next ready job of ``topic``, or None if there is none.

        The job is deleted from Redis as it is handed out (at most once).
        """
        call = _core.pop_call(self._keys, topic)
        with self._guard:
            reply = self._scripts[scripts.POP](keys=call.keys, args=call.args)
        return _core.parse_message(reply)

    def bpop(self, topic: str, timeout: float) -> Optional[Message]:
        """Like :meth:`pop`, but wait up to ``timeout`` seconds (0 = forever) for a job.

        Returns None when the time is up.
        """
        queue = _core.pop_call(self._keys, topic).keys[0]
        deadline = _core.wait_deadline(_core.check_timeout(timeout), time.monotonic())
        take = self._scripts[scripts.TAKE]
        with self._guard:
            while True:
                wait = _core.brpop_seconds(deadline, time.monotonic())
                if wait is None:
                    return None
                job_id = _core.parse_brpop(self._redis.brpop([queue], timeout=wait))
                if job_id is None:
                    if deadline is None:
                        continue
                    return None
                call = _core.take_call(self._keys, job_id)
                message = _core.parse_message(take(keys=call.keys, args=call.args))
                if message is not None:
                    return message

    def remove(self, id: str) -> bool:
        """Cancel job ``id``; True if there was something to cancel.

        A waiting job is never delivered; a job already in its ready queue is
        skipped by pop. A job already popped cannot be recalled (False).
        """
        call = _core.remove_call(self._keys, id)
        with self._guard:
            reply = self._scripts[scripts.REMOVE](keys=call.keys, args=call.args)
        return _core.parse_removed(reply)

    # ------------------------------------------------------------------
    # at least once: reserve / ack (docs/PROTOCOL.md, "Reserve and ack")

    def reserve(self, topic: str, ttr: float) -> Optional[ReservedMessage]:
        """Take the next ready job of ``topic`` reserved for ``ttr`` seconds, or None.

        Unlike :meth:`pop`, the job stays in Redis, invisible to other
        consumers, until :meth:`ack` (done), :meth:`release` (try again) or
        :meth:`bury` (give up); if none comes before the deadline
        (``ttr``, rounded to the millisecond, more than 0), a Delayer 2
        server counts a failed attempt and delivers the job again. So a
        worker that dies loses nothing; the price is that a job can be
        delivered more than once, and must be safe to do twice.
        """
        call = _core.reserve_call(self._keys, topic, ttr)
        with self._guard:
            reply = self._scripts[scripts.RESERVE](keys=call.keys, args=call.args)
        return _core.parse_reserved(reply)

    def breserve(self, topic: str, ttr: float, timeout: float) -> Optional[ReservedMessage]:
        """Like :meth:`reserve`, but wait up to ``timeout`` seconds (0 = forever) for a job.

        Returns None when the time is up. The wait (``BLMOVE`` of the ready
        queue onto itself) takes nothing: were it to pop the id as
        :meth:`bpop` does, a worker dying before reserving it would lose the
        job. If another worker reserves the job first, it waits again within
        the same timeout.
        """
        call = _core.reserve_call(self._keys, topic, ttr)
        queue = call.keys[0]
        deadline = _core.wait_deadline(_core.check_timeout(timeout), time.monotonic())
        reserve = self._scripts[scripts.RESERVE]
        with self._guard:
            while True:
                wait = _core.brpop_seconds(deadline, time.monotonic())
                if wait is None:
                    return None
                # redis-py types the timeout as int; Redis 6.2+ takes fractions
                ready = self._redis.blmove(queue, queue, wait, "RIGHT", "RIGHT")  # type: ignore[arg-type]
                if not _core.parse_blmove(ready):
                    if deadline is None:
                        continue
                    return None
                job = _core.parse_reserved(reserve(keys=call.keys, args=call.args))
                if job is not None:
                    return job

    def ack(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None) -> bool:
        """The job is done: delete it. True if the reservation was still held.

        ``job`` is what :meth:`reserve` returned (then only that reservation
        is acked), or an id with its ``receipt`` if known (without one,
        whichever reservation is current). False means nothing changed: the
        job was acked already, or its reservation ran out and the job went to
        another worker (whose work then counts, not this one's).
        """
        call = _core.ack_call(self._keys, job, receipt)
        with self._guard:
            reply = self._scripts[scripts.ACK](keys=call.keys, args=call.args)
        return _core.parse_removed(reply, "ack.lua")

    def touch(self, job: Union[ReservedMessage, str], ttr: float, receipt: Optional[str] = None) -> Optional[float]:
        """Still working on it: the reservation's deadline becomes ``ttr`` seconds from now.

        So the job is not handed out again while the work goes on. The
        deadline is set, not added to (a shorter ``ttr`` brings it in), and
        the attempt count does not change. Returns the new deadline (Unix
        seconds, Redis's clock), or None when the reservation was not held
        (as for :meth:`ack`). ``job`` and ``receipt`` as in :meth:`ack`,
        ``ttr`` as in :meth:`reserve`.
        """
        call = _core.touch_call(self._keys, job, ttr, receipt)
        with self._guard:
            reply = self._scripts[scripts.TOUCH](keys=call.keys, args=call.args)
        return _core.parse_touched(reply)

    def release(
        self, job: Union[ReservedMessage, str], delay: Optional[float] = None, receipt: Optional[str] = None
    ) -> bool:
        """A failed attempt: give the job back for a retry. True if the reservation was held.

        The job is due again after ``delay`` seconds, or, without one, after
        its backoff (the point of a backoff: a job failing for a reason that
        lasts is not retried in a tight loop). A job that has used up its
        ``max_attempts`` goes to its topic's dead letters instead. ``job``
        and ``receipt`` as in :meth:`ack`.
        """
        call = _core.release_call(self._keys, job, delay, receipt)
        with self._guard:
            reply = self._scripts[scripts.RELEASE](keys=call.keys, args=call.args)
        return _core.parse_ended(reply)

    def bury(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None) -> bool:
        """Give up on the job: send it to its topic's dead letters now, whatever
        its attempts (for a job that can never succeed). True if the
        reservation was held. ``job`` and ``receipt`` as in :meth:`ack`."""
        call = _core.bury_call(self._keys, job, receipt)
        with self._guard:
            reply = self._scripts[scripts.RELEASE](keys=call.keys, args=call.args)
        return _core.parse_ended(reply)

    def reschedule(self, id: str, delay: float) -> Optional[float]:
        """Make waiting job ``id`` due ``delay`` seconds from now; return the new due time.

        Returns None when the job is not waiting (ready, reserved, dead, gone
        or unknown): rescheduling never creates or brings back a job. The
        job's data keeps the same lifetime after its new due time.
        """
        call = _core.reschedule_call(self._keys, id, delay)
        with self._guard:
            reply = self._scripts[scripts.RESCHEDULE](keys=call.keys, args=call.args)
        return _core.parse_rescheduled(reply)

    def dead_letters(self, topic: str, start: int = 0, count: int = 100) -> List[DeadLetter]:
        """List ``topic``'s dead letters, newest first: ``count`` (1 to 1000)
        entries from position ``start``.

        Entries whose job was removed or pushed again since it died are
        skipped, so a page can hold fewer than ``count``.
        """
        call = _core.dead_list_call(self._keys, topic, start, count)
        with self._guard:
            reply = self._scripts[scripts.DEAD](keys=call.keys, args=call.args)
        return _core.parse_dead_letters(reply)

    def requeue_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Give dead letters of ``topic`` a new start: due now, attempts reset to 0.

        ``ids`` picks which (an empty iterable: none); None means all of them.
        Returns how many jobs were re-queued.
        """
        return self._dead_take("requeue", topic, ids)

    def purge_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Delete dead letters of ``topic`` for good; ``ids`` as in :meth:`requeue_dead`.

        Returns how many jobs were deleted.
        """
        return self._dead_take("purge", topic, ids)

    def _dead_take(self, action: str, topic: str, ids: Optional[Iterable[str]]) -> int:
        # Every call handles at most 1000 entries so that Redis is never held
        # for long; "all" repeats until a call takes fewer than asked.
        every, calls = _core.dead_take_calls(self._keys, action, topic, ids)
        dead = self._scripts[scripts.DEAD]
        total = 0
        with self._guard:
            while every is not None:
                done, taken = _core.parse_dead_taken(dead(keys=every.keys, args=every.args))
                total += done
                if taken < _core.DEAD_BATCH:
                    break
            for call in calls:
                total += _core.parse_dead_taken(dead(keys=call.keys, args=call.args))[0]
        return total

    def close(self) -> None:
        """Close the connections, if this client created them."""
        if self._owns_client:
            with self._guard:
                self._redis.close()

    def __enter__(self) -> "Delayer":
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Delayer(redis={self._where!r}, prefix={self._keys.prefix!r})"
