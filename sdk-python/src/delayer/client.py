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
from .models import DEFAULT_READY_MAX_LIFETIME, Job, Message

__all__ = ["Delayer"]

PathArg = Union[str, "os.PathLike[str]"]


def _no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


class Delayer:
    """A Delayer client: push delayed jobs, pop them when due, remove them.

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.Redis`` instead (it must not decode
    responses, and :meth:`close` leaves it open). Redis's own socket timeout,
    if the given client sets one, must exceed the longest :meth:`bpop` wait.

    Every error is a :class:`delayer.DelayerError`: :class:`InvalidArgument`
    (nothing sent), :class:`ConnectionFailed`, :class:`ProtocolError`.
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
    ) -> float:
        """Schedule job ``id`` on ``topic`` in ``delay`` seconds; return its due time.

        ``delay`` is rounded to the nearest millisecond; ``body`` is bytes (a
        ``str`` is encoded as UTF-8). The job's data expires
        ``delay + ready_max_lifetime`` seconds from now. Pushing an id that is
        still waiting replaces it. Returns the due time as Unix seconds by
        Redis's clock.
        """
        call = _core.push_call(self._keys, topic, id, delay, body, ready_max_lifetime)
        with self._guard:
            reply = self._scripts[scripts.PUSH](keys=call.keys, args=call.args)
        return _core.parse_due(reply)

    def push_many(self, jobs: Iterable[Job]) -> List[float]:
        """Push many jobs, pipelined; return their due times in order.

        Every job is validated before anything is sent. Jobs go by
        push_many.lua, 100 per call and 10 calls per round trip; the jobs of
        one call are atomic together, the batch as a whole is not (a failure
        may leave earlier jobs pushed).
        """
        calls = _core.push_many_calls(self._keys, jobs)
        dues: List[float] = []
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
        return dues

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
        limit = _core.check_timeout(timeout)
        deadline = None if limit == 0 else time.monotonic() + limit
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
