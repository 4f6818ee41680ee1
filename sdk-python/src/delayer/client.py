"""The synchronous Delayer client, on redis-py.

Only I/O lives here: every operation is built, checked and parsed by
:mod:`delayer._ops` (shared with the asyncio client), and driven by
:meth:`Delayer._drive`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Iterable, List, Optional, Tuple, Type, TypeVar, Union

import redis
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry

from . import _cluster, _ops, _send
from ._base import ClientBase, Flavour
from .inspect import InspectMixin
from ._translate import lost_connection
from .models import DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, Job, Message, ReservedMessage

__all__ = ["Delayer"]

T = TypeVar("T")


class Delayer(ClientBase["redis.Redis"], InspectMixin):
    """A Delayer client: push delayed jobs, pop them when due, remove them.

    Two ways to consume: :meth:`pop` / :meth:`bpop` hand a job out at most
    once (it is deleted as it is handed out); :meth:`reserve` /
    :meth:`breserve` hand it out at least once (it stays reserved until
    :meth:`ack`, and comes back if the worker fails or dies).

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.Redis`` instead (it must not decode
    responses, and :meth:`close` leaves it open). :meth:`bpop` and
    :meth:`breserve` wait their whole timeout whatever the client's socket
    timeout: they wait on connections of their own, made like the client's.

    Job ids are global across topics in the classic 1.x key layout (the
    default): a push replaces any job with its id, whatever its topic, unless
    ``if_absent``. With ``layout="topic"`` (``[delayer] layout = topic``)
    every key of a topic shares one hash slot and ids are per topic; the
    id-only calls (remove, reschedule, and ack, touch, release, bury by id)
    then take the job's ``topic=``.

    Every error is a :class:`delayer.DelayerError`: :class:`InvalidArgument`
    (nothing sent), :class:`ConnectionFailed` (also when Redis went away: the
    next call connects again), :class:`ProtocolError`, :class:`IdTakenError`
    (``if_absent``).
    """

    _flavour = Flavour(redis.Redis, redis.ConnectionPool, Retry, "redis.Redis")

    def _drive(self, op: _send.Op[T], durable: object = False) -> T:
        """Run ``op`` to its result, sending each step (:func:`delayer._send.lower`)."""
        with self._guard:
            steps = _send.lower(op, durable)
            try:
                step = next(steps)
                while True:
                    step = steps.send(self._again_once(step))
            except StopIteration as done:
                result: T = done.value
                return result

    def _again_once(self, step: Union[_send.Send, _send.Wait]) -> Any:
        """Send ``step``; if its connection turns out to be gone (Redis restarted
        since it was last used, which redis-py does not always notice before
        use), drop the pool's idle connections and send it once more on a new
        one. So the first call after Redis is back works; while Redis is down
        it fails fast all the same. (RedisCluster reconnects, and finds the
        new master, itself.)"""
        try:
            return self._do(step)
        except RedisError as e:
            if self._cluster or not lost_connection(e):
                raise
        (self._waiter if isinstance(step, _send.Wait) else self._redis).connection_pool.disconnect(
            inuse_connections=False
        )
        reply = self._do(step)
        self._reconnects += 1  # a new connection answered: a Worker reads the eviction policy again
        return reply

    def _do(self, step: Union[_send.Send, _send.Wait]) -> Any:
        if isinstance(step, _send.Wait):
            if step.command == "BRPOP":
                return self._waiter.brpop([step.queue], timeout=step.seconds)
            # redis-py types the timeout as int; Redis 6.2+ takes fractions
            return self._waiter.blmove(step.queue, step.queue, step.seconds, "RIGHT", "RIGHT")  # type: ignore[arg-type]
        r: Any = self._redis
        if self._cluster and step.wait_ms:
            return self._on_nodes(step)
        if len(step.commands) == 1 and not step.wait_ms:
            try:
                return [r.execute_command(*step.commands[0])]
            except ResponseError as e:
                return [e]
        # (a pipeline's execute gives its connection back, with or without a context manager)
        pipe = r.pipeline(transaction=False)
        for command in _send.with_wait(step):
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    def _on_nodes(self, step: _send.Send) -> Any:
        """A Send with WAIT on a Redis Cluster: per master, its commands and
        WAIT on one connection of a plain client of that node
        (:func:`delayer._cluster.on_nodes`)."""
        r: Any = self._redis
        parts = _cluster.on_nodes(step, r.get_node_from_key)
        try:
            part = next(parts)
            while True:
                if part is None:  # a command was redirected: read the slot table again
                    r.nodes_manager.initialize()
                    part = parts.send(None)
                    continue
                (host, port), commands = part
                with self._node(host, port).pipeline(transaction=False) as pipe:
                    for command in commands:
                        pipe.execute_command(*command)  # type: ignore[no-untyped-call]
                    part = parts.send(pipe.execute(raise_on_error=False))
        except StopIteration as done:
            return done.value

    def push(self, topic: str, id: str, delay: float, body: Union[bytes, str] = b"",
             ready_max_lifetime: int = DEFAULT_READY_MAX_LIFETIME, *, max_attempts: Optional[int] = None,
             backoff: Optional[Backoff] = None, if_absent: bool = False, durable: Union[bool, float] = False,
             traceparent: Optional[str] = None) -> float:
        """Schedule job ``id`` on ``topic`` in ``delay`` seconds; return its due time.

        ``delay`` is rounded to the nearest millisecond; ``body`` is bytes (a
        ``str`` is encoded as UTF-8). The job's data expires
        ``delay + ready_max_lifetime`` seconds from now. Returns the due time
        as Unix seconds by Redis's clock.

        **Ids are global across topics** in the classic 1.x key layout (per
        topic in the per-topic layout, where this replaces only ``topic``'s): by
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

        ``traceparent`` (a W3C trace context, ``00-<32 hex>-<16 hex>-<2
        hex>``) is kept with the job and handed back to its consumer
        (``.traceparent`` of what pop, reserve and the Workers give). Left
        out, with ``delayer[opentelemetry]`` installed, the current span's
        is taken; ``""`` pushes none.

        ``durable=True`` (or a number of seconds; True is 1 s) waits, after
        the write and on its connection, for a replica to have it (``WAIT
        1``): :class:`NotReplicatedError` when none did in time (the job is on
        the master, but a failover now could lose it). Without it a failover
        can lose the last acknowledged pushes (see the README).
        """
        op = _ops.push(
            self._keys, topic, id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent, traceparent
        )
        return self._drive(op, durable)

    def push_many(
        self, jobs: Iterable[Job], *, if_absent: bool = False, durable: Union[bool, float] = False
    ) -> List[float]:
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
        return self._drive(_ops.push_many(self._keys, jobs, if_absent), durable)

    def pop(self, topic: str) -> Optional[Message]:
        """Take the next ready job of ``topic``, or None if there is none.

        The job is deleted from Redis as it is handed out (at most once).
        """
        return self._drive(_ops.pop(self._keys, topic))

    def bpop(self, topic: str, timeout: float) -> Optional[Message]:
        """Like :meth:`pop`, but wait up to ``timeout`` seconds (0 = forever) for a job.

        Returns None when the time is up. The whole timeout is waited,
        whatever the client's socket timeout.
        """
        return self._drive(_ops.bpop(self._keys, topic, timeout))

    def remove(self, id: str, topic: Optional[str] = None) -> bool:
        """Cancel job ``id``; True if there was something to cancel.

        A waiting job is never delivered; a job already in its ready queue is
        skipped by pop. A job already popped cannot be recalled (False).
        ``topic``: the job's, which the per-topic layout needs (its ids are
        per topic); the classic layout's ids are global, so it needs none.
        """
        return self._drive(_ops.remove(self._keys, id, topic))

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
        return self._drive(_ops.reserve(self._keys, topic, ttr))

    def reserve_many(
        self,
        topic: str,
        ttr: float,
        n: int,
        acks: Iterable[Union[ReservedMessage, str, Tuple[str, Optional[str]]]] = (),
    ) -> Tuple[List[bool], List[ReservedMessage]]:
        """Ack ``acks``, then reserve up to ``n`` ready jobs of ``topic``, in one script call.

        Returns ``(acked, jobs)``: one bool per ack in order (as :meth:`ack`
        returns), and 0 to ``n`` (at most 1000) jobs reserved for ``ttr``
        seconds, in ready order, each as :meth:`reserve` returns it. An ack is
        a :class:`ReservedMessage`, an id, or an ``(id, receipt)`` pair. A
        worker acks what it finished and takes its next jobs in one round
        trip; ``n=0`` only acks. Never waits: see :meth:`breserve`.
        """
        return self._drive(_ops.reserve_many(self._keys, topic, ttr, n, acks))

    def breserve(self, topic: str, ttr: float, timeout: float) -> Optional[ReservedMessage]:
        """Like :meth:`reserve`, but wait up to ``timeout`` seconds (0 = forever) for a job.

        Returns None when the time is up. The wait (``BLMOVE`` of the ready
        queue onto itself) takes nothing: were it to pop the id as
        :meth:`bpop` does, a worker dying before reserving it would lose the
        job. If another worker reserves the job first, it waits again within
        the same timeout.
        """
        return self._drive(_ops.breserve(self._keys, topic, ttr, timeout))

    def ack(
        self, job: Union[ReservedMessage, str], receipt: Optional[str] = None, *, topic: Optional[str] = None
    ) -> bool:
        """The job is done: delete it. True if the reservation was still held.

        ``job`` is what :meth:`reserve` returned (then only that reservation
        is acked), or an id with its ``receipt`` if known (without one,
        whichever reservation is current). False means nothing changed: the
        job was acked already, or its reservation ran out and the job went to
        another worker (whose work then counts, not this one's), or the id
        was pushed again. ``topic``: the job's, for a job given by id in the
        per-topic layout (a reserved job carries its own).
        """
        return self._drive(_ops.ack(self._keys, job, receipt, topic))

    def touch(self, job: Union[ReservedMessage, str], ttr: float, receipt: Optional[str] = None, *,
              topic: Optional[str] = None) -> Optional[float]:
        """Still working on it: the reservation's deadline becomes ``ttr`` seconds from now.

        So the job is not handed out again while the work goes on. The
        deadline is set, not added to (a shorter ``ttr`` brings it in), and
        the attempt count does not change. Returns the new deadline (Unix
        seconds, Redis's clock), or None when the reservation was not held
        (as for :meth:`ack`). ``job``, ``receipt`` and ``topic`` as in
        :meth:`ack`, ``ttr`` as in :meth:`reserve`.
        """
        return self._drive(_ops.touch(self._keys, job, ttr, receipt, topic))

    def release(self, job: Union[ReservedMessage, str], delay: Optional[float] = None, receipt: Optional[str] = None, *,
                error: Optional[str] = None, topic: Optional[str] = None) -> bool:
        """A failed attempt: give the job back for a retry. True if the reservation was held.

        The job is due again after ``delay`` seconds, or, without one, after
        its backoff (the point of a backoff: a job failing for a reason that
        lasts is not retried in a tight loop). A job that has used up its
        ``max_attempts`` goes to its topic's dead letters instead. ``job``,
        ``receipt`` and ``topic`` as in :meth:`ack`. ``error``, when given, says why
        the attempt failed (a Worker sends ``"ValueError: bad order"``): it is
        kept on the job as its last error (the first 1000 bytes), shown by
        dead letters and job lookups.
        """
        return self._drive(_ops.release(self._keys, job, delay, receipt, error, topic))

    def bury(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None, *, error: Optional[str] = None,
             topic: Optional[str] = None) -> bool:
        """Give up on the job: send it to its topic's dead letters now, whatever
        its attempts (for a job that can never succeed). True if the
        reservation was held. ``job``, ``receipt`` and ``topic`` as in
        :meth:`ack`, ``error`` as in :meth:`release`."""
        return self._drive(_ops.bury(self._keys, job, receipt, error, topic))

    def reschedule(self, id: str, delay: float, topic: Optional[str] = None) -> Optional[float]:
        """Make waiting job ``id`` due ``delay`` seconds from now; return the new due time.

        Returns None when the job is not waiting (ready, reserved, dead, gone
        or unknown): rescheduling never creates or brings back a job. The
        job's data keeps the same lifetime after its new due time. ``topic``
        as in :meth:`remove`.
        """
        return self._drive(_ops.reschedule(self._keys, id, delay, topic))

    def dead_letters(self, topic: str, start: int = 0, count: int = 100) -> List[DeadLetter]:
        """List ``topic``'s dead letters, newest first: ``count`` (1 to 1000)
        entries from position ``start``.

        Entries whose job was removed or pushed again since it died are
        skipped, so a page can hold fewer than ``count``.
        """
        return self._drive(_ops.dead_letters(self._keys, topic, start, count))

    def requeue_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Give dead letters of ``topic`` a new start: due now, attempts reset to 0.

        ``ids`` picks which (an empty iterable: none); None means all of them,
        in calls of 1000. Returns how many jobs were re-queued.
        """
        return self._drive(_ops.dead_take(self._keys, "requeue", topic, ids))

    def purge_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Delete dead letters of ``topic`` for good; ``ids`` as in :meth:`requeue_dead`.

        Returns how many jobs were deleted.
        """
        return self._drive(_ops.dead_take(self._keys, "purge", topic, ids))

    def close(self) -> None:
        """Close the connections: the waits' always, the client's if this client created it."""
        with self._guard:
            if self._cluster:
                self._waiter.close()
                for node in self._nodes.values():
                    node.close()
            else:
                self._waiter.connection_pool.disconnect()
            if self._owns_client:
                self._redis.close()

    def __enter__(self) -> "Delayer":
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()
