"""The asyncio Delayer client, on ``redis.asyncio``.

Same constructor and methods as :class:`delayer.Delayer`, as coroutines. Only
I/O lives here: every operation is built, checked and parsed by
:mod:`delayer._ops` (shared with the sync client), and driven by
:meth:`Delayer._drive`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Iterable, List, Optional, Tuple, Type, TypeVar, Union

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.exceptions import RedisError, ResponseError

from . import _cluster, _ops, _send
from ._base import ClientBase, Flavour
from . import client as _sync
from .inspect import AsyncInspectMixin, InspectMixin
from ._translate import lost_connection
from .aio_worker import Delivery, Worker  # the asyncio Worker, exported here
from .models import DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, FlowState, Job, Message, ReservedMessage

__all__ = ["Delayer", "Worker", "Delivery"]

T = TypeVar("T")


class Delayer(ClientBase["aioredis.Redis"], AsyncInspectMixin):
    """An asyncio Delayer client: push delayed jobs, pop or reserve them when due, remove them.

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.asyncio.Redis`` instead (it must not
    decode responses, and :meth:`close` leaves it open). Use it as
    ``async with Delayer(...) as d:`` or call ``await d.close()``.

    Job ids are global across topics in the classic 1.x key layout (the
    default): a push replaces any job with its id, whatever its topic, unless
    ``if_absent``. With ``layout="topic"`` (``[delayer] layout = topic``)
    every key of a topic shares one hash slot and ids are per topic; the
    id-only calls (remove, reschedule, and ack, touch, release, bury by id)
    then take the job's ``topic=``.
    Every error is a :class:`delayer.DelayerError`; see :class:`delayer.Delayer`.
    """

    _flavour = Flavour(aioredis.Redis, aioredis.ConnectionPool, Retry, "redis.asyncio.Redis")

    async def _drive(self, op: _send.Op[T], durable: object = False) -> T:
        with self._guard:
            steps = _send.lower(op, durable)
            try:
                step = next(steps)
                while True:
                    step = steps.send(await self._again_once(step))
            except StopIteration as done:
                result: T = done.value
                return result

    async def _again_once(self, step: Union[_send.Send, _send.Wait]) -> Any:
        try:
            return await self._do(step)
        except RedisError as e:
            if self._cluster or not lost_connection(e):
                raise
        await (self._waiter if isinstance(step, _send.Wait) else self._redis).connection_pool.disconnect(
            inuse_connections=False
        )
        reply = await self._do(step)
        self._reconnects += 1  # a new connection answered: a Worker reads the eviction policy again
        return reply

    async def _do(self, step: Union[_send.Send, _send.Wait]) -> Any:
        if isinstance(step, _send.Wait):
            if step.command == "BRPOP":
                return await self._waiter.brpop([step.queue], timeout=step.seconds)
            if step.command == "BRPOPLPUSH":  # a paused topic's gate, onto itself: wakes at resume, takes nothing
                return await self._waiter.brpoplpush(step.queue, step.queue, step.seconds)
            # redis-py types the timeout as int; Redis 6.2+ takes fractions
            return await self._waiter.blmove(
                step.queue, step.queue, step.seconds, "RIGHT", "RIGHT"  # type: ignore[arg-type]
            )
        r: Any = self._redis
        if self._cluster and step.wait_ms:
            return await self._on_nodes(step)
        if len(step.commands) == 1 and not step.wait_ms:
            try:
                return [await r.execute_command(*step.commands[0])]
            except ResponseError as e:
                return [e]
        # (a pipeline's execute gives its connection back, with or without a context manager)
        pipe = r.pipeline(transaction=False)
        for command in _send.with_wait(step):
            pipe.execute_command(*command)
        return await pipe.execute(raise_on_error=False)

    async def _on_nodes(self, step: _send.Send) -> Any:
        r: Any = self._redis
        await r.initialize()  # the slot table (a no-op once read)
        parts = _cluster.on_nodes(step, r.get_node_from_key)
        try:
            part = next(parts)
            while True:
                if part is None:  # a command was redirected: read the slot table again
                    await r.nodes_manager.initialize()
                    part = parts.send(None)
                    continue
                (host, port), commands = part
                async with self._node(host, port).pipeline(transaction=False) as pipe:
                    for command in commands:
                        pipe.execute_command(*command)
                    part = parts.send(await pipe.execute(raise_on_error=False))
        except StopIteration as done:
            return done.value

    async def push(self, topic: str, id: str, delay: float, body: Union[bytes, str] = b"",
                   ready_max_lifetime: int = DEFAULT_READY_MAX_LIFETIME, *, max_attempts: Optional[int] = None,
                   backoff: Optional[Backoff] = None, if_absent: bool = False, durable: Union[bool, float] = False,
                   traceparent: Optional[str] = None) -> float:
        op = _ops.push(self._keys, topic, id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent,
                       traceparent)
        return await self._drive(op, durable)

    async def push_many(
        self, jobs: Iterable[Job], *, if_absent: bool = False, durable: Union[bool, float] = False
    ) -> List[float]:
        return await self._drive(_ops.push_many(self._keys, jobs, if_absent), durable)

    async def pop(self, topic: str) -> Optional[Message]:
        return await self._drive(_ops.pop(self._keys, topic))

    async def bpop(self, topic: str, timeout: float) -> Optional[Message]:
        return await self._drive(_ops.bpop(self._keys, topic, timeout))

    async def remove(self, id: str, topic: Optional[str] = None) -> bool:
        return await self._drive(_ops.remove(self._keys, id, topic))

    # ------------------------------------------------------------------
    # at least once: reserve / ack (docs/PROTOCOL.md, "Reserve and ack")

    async def reserve(self, topic: str, ttr: float) -> Optional[ReservedMessage]:
        return await self._drive(_ops.reserve(self._keys, topic, ttr))

    async def reserve_many(
        self,
        topic: str,
        ttr: float,
        n: int,
        acks: Iterable[Union[ReservedMessage, str, Tuple[str, Optional[str]]]] = (),
    ) -> Tuple[List[bool], List[ReservedMessage]]:
        return await self._drive(_ops.reserve_many(self._keys, topic, ttr, n, acks))

    async def breserve(self, topic: str, ttr: float, timeout: float) -> Optional[ReservedMessage]:
        return await self._drive(_ops.breserve(self._keys, topic, ttr, timeout))

    async def ack(
        self, job: Union[ReservedMessage, str], receipt: Optional[str] = None, *, topic: Optional[str] = None
    ) -> bool:
        return await self._drive(_ops.ack(self._keys, job, receipt, topic))

    async def touch(self, job: Union[ReservedMessage, str], ttr: float, receipt: Optional[str] = None, *,
                    topic: Optional[str] = None) -> Optional[float]:
        return await self._drive(_ops.touch(self._keys, job, ttr, receipt, topic))

    async def release(
        self,
        job: Union[ReservedMessage, str],
        delay: Optional[float] = None,
        receipt: Optional[str] = None,
        *,
        error: Optional[str] = None,
        topic: Optional[str] = None,
    ) -> bool:
        return await self._drive(_ops.release(self._keys, job, delay, receipt, error, topic))

    async def bury(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None, *,
                   error: Optional[str] = None, topic: Optional[str] = None) -> bool:
        return await self._drive(_ops.bury(self._keys, job, receipt, error, topic))

    async def reschedule(self, id: str, delay: float, topic: Optional[str] = None) -> Optional[float]:
        return await self._drive(_ops.reschedule(self._keys, id, delay, topic))

    async def dead_letters(self, topic: str, start: int = 0, count: int = 100) -> List[DeadLetter]:
        return await self._drive(_ops.dead_letters(self._keys, topic, start, count))

    async def requeue_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        return await self._drive(_ops.dead_take(self._keys, "requeue", topic, ids))

    async def purge_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        return await self._drive(_ops.dead_take(self._keys, "purge", topic, ids))

    # ------------------------------------------------------------------
    # flow control (docs/PROTOCOL.md, "Flow control (pause)"; rate limits: docs/design/flow-control.md §5)

    async def pause(self, topic: str) -> bool:
        return await self._drive(_ops.pause(self._keys, topic))

    async def resume(self, topic: str) -> bool:
        return await self._drive(_ops.resume(self._keys, topic))

    async def is_paused(self, topic: str) -> bool:
        return await self._drive(_ops.is_paused(self._keys, topic))

    async def flow(self, topic: str) -> FlowState:
        return await self._drive(_ops.flow(self._keys, topic))

    async def set_rate_limit(self, topic: str, per_second: float, burst: Optional[int] = None) -> FlowState:
        return await self._drive(_ops.set_rate_limit(self._keys, topic, per_second, burst))

    async def clear_rate_limit(self, topic: str) -> bool:
        return await self._drive(_ops.clear_rate_limit(self._keys, topic))

    async def close(self) -> None:
        """Close the connections: the waits' always, the client's if this client created it."""
        with self._guard:
            if self._cluster:
                await _aclose(self._waiter)
                for node in self._nodes.values():
                    await _aclose(node)
            else:
                await self._waiter.connection_pool.disconnect()
            if self._owns_client:
                await _aclose(self._redis)

    async def __aenter__(self) -> "Delayer":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()


async def _aclose(client: Any) -> None:
    """Close a redis-py asyncio client (``aclose`` since redis-py 5.0.1, ``close`` before)."""
    closer = getattr(client, "aclose", None)
    if closer is not None:
        await closer()
    else:  # redis-py < 5.0.1
        await client.close()


def _same_docs(twin: type, of: type) -> None:
    """Give the methods of ``twin`` without a docstring those of ``of``: they mean the same, awaited."""
    for name, method in vars(twin).items():
        if callable(method) and method.__doc__ is None and getattr(of, name, None) is not None:
            method.__doc__ = getattr(of, name).__doc__


_same_docs(Delayer, _sync.Delayer)
_same_docs(AsyncInspectMixin, InspectMixin)
