"""The asyncio Delayer client, on ``redis.asyncio``.

Same constructor and methods as :class:`delayer.Delayer`, as coroutines; the
key names, input rules, scripts and reply parsing are shared with it.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import Any, Dict, Iterable, List, Optional, Type, Union

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript

from . import _core, config, scripts
from .errors import InvalidArgument
from .keys import DEFAULT_PREFIX, Keys
from .models import DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, Job, Message, ReservedMessage, Taken

__all__ = ["Delayer"]

PathArg = Union[str, "os.PathLike[str]"]


def _no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


class Delayer:
    """An asyncio Delayer client: push delayed jobs, pop or reserve them when due, remove them.

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.asyncio.Redis`` instead (it must not
    decode responses, and :meth:`close` leaves it open). Use it as
    ``async with Delayer(...) as d:`` or call ``await d.close()``.

    Every error is a :class:`delayer.DelayerError`.
    """

    def __init__(
        self,
        url: str = _core.DEFAULT_URL,
        prefix: str = DEFAULT_PREFIX,
        *,
        client: Optional["aioredis.Redis"] = None,
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
                aioredis.Redis.from_url, _no_retry(), url, password, (tls_ca_file, tls_cert_file, tls_key_file)
            )
            client = made
            _core.set_credentials(client.connection_pool.connection_kwargs, username, password)
            self._owns_client = True
        else:
            _core.reject_url_options(username, password, tls_ca_file, tls_cert_file, tls_key_file)
            if not isinstance(client, aioredis.Redis):
                raise InvalidArgument(f"client must be a redis.asyncio.Redis, not {type(client).__name__}")
            self._owns_client = False
        kwargs: Dict[str, Any] = dict(client.connection_pool.connection_kwargs)
        _core.check_binary(kwargs)
        where, more = _core.describe(kwargs)
        self._redis: "aioredis.Redis" = client
        self._where = where
        self._guard = _core.Guard(where, secrets + more)
        self._scripts: Dict[str, AsyncScript] = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

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
    def redis(self) -> "aioredis.Redis":
        """The underlying redis.asyncio client."""
        return self._redis

    async def push(
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

        Ids are global across topics: the job replaces any job with its id,
        unless ``if_absent=True`` (then :class:`delayer.IdTakenError` when it is
        taken). See :meth:`delayer.Delayer.push` (also for ``max_attempts`` and ``backoff``).
        """
        call = _core.push_call(
            self._keys, topic, id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent
        )
        with self._guard:
            reply = await self._scripts[scripts.PUSH](keys=call.keys, args=call.args)
        return _core.parse_push(call, reply)

    async def push_many(self, jobs: Iterable[Job], *, if_absent: bool = False) -> List[float]:
        """Push many jobs, pipelined; return their due times in order.

        See :meth:`delayer.Delayer.push_many`.
        """
        calls = _core.push_many_calls(self._keys, jobs, if_absent)
        dues: List[Union[float, Taken]] = []
        source = scripts.source(scripts.PUSH_MANY)
        sha = self._scripts[scripts.PUSH_MANY].sha
        with self._guard:
            for chunk in _core.chunks(calls):
                async with self._redis.pipeline(transaction=False) as pipe:
                    # a no-op unless Redis lost the script (restart, SCRIPT FLUSH)
                    pipe.script_load(source)
                    for call in chunk:
                        pipe.evalsha(sha, len(call.keys), *call.keys, *call.args)
                    replies = await pipe.execute()
                dues.extend(_core.parse_push_many(chunk, replies))
        return _core.pushed_all(dues)

    async def pop(self, topic: str) -> Optional[Message]:
        """Take the next ready job of ``topic``, or None if there is none."""
        call = _core.pop_call(self._keys, topic)
        with self._guard:
            reply = await self._scripts[scripts.POP](keys=call.keys, args=call.args)
        return _core.parse_message(reply)

    async def bpop(self, topic: str, timeout: float) -> Optional[Message]:
        """Like :meth:`pop`, but wait up to ``timeout`` seconds (0 = forever); None on timeout."""
        queue = _core.pop_call(self._keys, topic).keys[0]
        deadline = _core.wait_deadline(_core.check_timeout(timeout), time.monotonic())
        take = self._scripts[scripts.TAKE]
        with self._guard:
            while True:
                wait = _core.brpop_seconds(deadline, time.monotonic())
                if wait is None:
                    return None
                job_id = _core.parse_brpop(await self._redis.brpop([queue], timeout=wait))
                if job_id is None:
                    if deadline is None:
                        continue
                    return None
                call = _core.take_call(self._keys, job_id)
                message = _core.parse_message(await take(keys=call.keys, args=call.args))
                if message is not None:
                    return message

    async def remove(self, id: str) -> bool:
        """Cancel job ``id``; True if there was something to cancel."""
        call = _core.remove_call(self._keys, id)
        with self._guard:
            reply = await self._scripts[scripts.REMOVE](keys=call.keys, args=call.args)
        return _core.parse_removed(reply)

    # ------------------------------------------------------------------
    # at least once: reserve / ack (docs/PROTOCOL.md, "Reserve and ack")

    async def reserve(self, topic: str, ttr: float) -> Optional[ReservedMessage]:
        """Take the next ready job of ``topic`` reserved for ``ttr`` seconds, or None.

        See :meth:`delayer.Delayer.reserve`: the job stays in Redis until
        :meth:`ack`, and is delivered again if its ttr runs out first.
        """
        call = _core.reserve_call(self._keys, topic, ttr)
        with self._guard:
            reply = await self._scripts[scripts.RESERVE](keys=call.keys, args=call.args)
        return _core.parse_reserved(reply)

    async def breserve(self, topic: str, ttr: float, timeout: float) -> Optional[ReservedMessage]:
        """Like :meth:`reserve`, but wait up to ``timeout`` seconds (0 = forever); None on timeout.

        The wait takes nothing from the queue; see :meth:`delayer.Delayer.breserve`.
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
                ready = await self._redis.blmove(queue, queue, wait, "RIGHT", "RIGHT")  # type: ignore[arg-type]
                if not _core.parse_blmove(ready):
                    if deadline is None:
                        continue
                    return None
                job = _core.parse_reserved(await reserve(keys=call.keys, args=call.args))
                if job is not None:
                    return job

    async def ack(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None) -> bool:
        """The job is done: delete it. True if the reservation was still held.

        See :meth:`delayer.Delayer.ack`.
        """
        call = _core.ack_call(self._keys, job, receipt)
        with self._guard:
            reply = await self._scripts[scripts.ACK](keys=call.keys, args=call.args)
        return _core.parse_removed(reply, "ack.lua")

    async def touch(
        self, job: Union[ReservedMessage, str], ttr: float, receipt: Optional[str] = None
    ) -> Optional[float]:
        """Still working on it: the reservation's deadline becomes ``ttr`` seconds
        from now. The new deadline, or None if the reservation was not held.

        See :meth:`delayer.Delayer.touch`.
        """
        call = _core.touch_call(self._keys, job, ttr, receipt)
        with self._guard:
            reply = await self._scripts[scripts.TOUCH](keys=call.keys, args=call.args)
        return _core.parse_touched(reply)

    async def release(
        self, job: Union[ReservedMessage, str], delay: Optional[float] = None, receipt: Optional[str] = None
    ) -> bool:
        """A failed attempt: retry after ``delay`` seconds or the job's backoff, or
        dead letters past ``max_attempts``. True if the reservation was held.

        See :meth:`delayer.Delayer.release`.
        """
        call = _core.release_call(self._keys, job, delay, receipt)
        with self._guard:
            reply = await self._scripts[scripts.RELEASE](keys=call.keys, args=call.args)
        return _core.parse_ended(reply)

    async def bury(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None) -> bool:
        """Send the job to its topic's dead letters now. True if the reservation was held."""
        call = _core.bury_call(self._keys, job, receipt)
        with self._guard:
            reply = await self._scripts[scripts.RELEASE](keys=call.keys, args=call.args)
        return _core.parse_ended(reply)

    async def reschedule(self, id: str, delay: float) -> Optional[float]:
        """Make waiting job ``id`` due ``delay`` seconds from now; the new due time, or
        None when it is not waiting. See :meth:`delayer.Delayer.reschedule`."""
        call = _core.reschedule_call(self._keys, id, delay)
        with self._guard:
            reply = await self._scripts[scripts.RESCHEDULE](keys=call.keys, args=call.args)
        return _core.parse_rescheduled(reply)

    async def dead_letters(self, topic: str, start: int = 0, count: int = 100) -> List[DeadLetter]:
        """List ``topic``'s dead letters, newest first (``count`` 1 to 1000 from ``start``)."""
        call = _core.dead_list_call(self._keys, topic, start, count)
        with self._guard:
            reply = await self._scripts[scripts.DEAD](keys=call.keys, args=call.args)
        return _core.parse_dead_letters(reply)

    async def requeue_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Re-queue dead letters of ``topic`` (``ids``, or all for None): due now,
        attempts reset. Returns how many. See :meth:`delayer.Delayer.requeue_dead`."""
        return await self._dead_take("requeue", topic, ids)

    async def purge_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Delete dead letters of ``topic`` (``ids``, or all for None). Returns how many."""
        return await self._dead_take("purge", topic, ids)

    async def _dead_take(self, action: str, topic: str, ids: Optional[Iterable[str]]) -> int:
        # At most 1000 entries per call, so that Redis is never held for long.
        every, calls = _core.dead_take_calls(self._keys, action, topic, ids)
        dead = self._scripts[scripts.DEAD]
        total = 0
        with self._guard:
            while every is not None:
                done, taken = _core.parse_dead_taken(await dead(keys=every.keys, args=every.args))
                total += done
                if taken < _core.DEAD_BATCH:
                    break
            for call in calls:
                total += _core.parse_dead_taken(await dead(keys=call.keys, args=call.args))[0]
        return total

    async def close(self) -> None:
        """Close the connections, if this client created them."""
        if self._owns_client:
            with self._guard:
                closer = getattr(self._redis, "aclose", None)
                if closer is not None:
                    await closer()
                else:  # redis-py < 5.0.1
                    await self._redis.close()

    async def __aenter__(self) -> "Delayer":
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Delayer(redis={self._where!r}, prefix={self._keys.prefix!r})"
