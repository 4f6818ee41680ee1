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
from .models import DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, FlowState, Job, Message, ReservedMessage

__all__ = ["Delayer"]

T = TypeVar("T")


class Delayer(ClientBase["redis.Redis"], InspectMixin):
    """A Delayer client: push delayed jobs, pop them when due, remove them.

    :meth:`pop` / :meth:`bpop` hand a job out at most once (deleted as it is
    handed out); :meth:`reserve` / :meth:`breserve` at least once (reserved
    until :meth:`ack`, back if the worker fails or dies).

    ``Delayer(url, prefix)`` connects lazily to the Redis at ``url``;
    ``client=`` uses an existing ``redis.Redis`` instead (it must not decode
    responses; :meth:`close` leaves it open).

    Job ids are global across topics in the classic 1.x key layout (the
    default). With ``layout="topic"`` every key of a topic shares one hash
    slot and ids are per topic: the calls naming a job by id take ``topic=``.

    Every error is a :class:`delayer.DelayerError`: :class:`InvalidArgument`
    (nothing written), :class:`ConnectionFailed` (the next call connects again),
    :class:`ProtocolError`, :class:`IdTakenError` (``if_absent``).
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
            if step.command == "BRPOPLPUSH":  # a paused topic's gate, onto itself: wakes at resume, takes nothing
                return self._waiter.brpoplpush(step.queue, step.queue, step.seconds)
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

        ``delay`` is rounded to the millisecond; ``body`` is bytes (a ``str``
        is encoded as UTF-8); the job's data expires ``delay +
        ready_max_lifetime`` seconds from now. Returns the due time (Unix
        seconds, Redis's clock).

        **Ids are global across topics** in the classic 1.x layout (per topic
        in the per-topic layout): a push replaces whatever job has the id, on
        any topic, unless ``if_absent=True``: then nothing is written and
        :class:`IdTakenError` says which job holds the id.

        ``max_attempts`` (0 = no limit, at most 1,000,000) and ``backoff``
        matter only to :meth:`reserve`: reservations before dead letters,
        and the wait after a failed one. Left out: 25, exponential from 1 s
        up to 1 h, and the bucket stays exactly as Delayer 1.x writes it.

        ``traceparent`` (W3C, ``00-<32 hex>-<16 hex>-<2 hex>``) is handed back
        to the job's consumer; left out, with ``delayer[opentelemetry]``, the
        current span's is taken; ``""`` pushes none.

        ``durable=True`` (or seconds; True is 1 s) waits for a replica to have
        the write (``WAIT 1`` on its connection): :class:`NotReplicatedError`
        when none did in time (a failover now could lose it; see the README).
        """
        op = _ops.push(self._keys, topic, id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent,
                       traceparent)
        return self._drive(op, durable)

    def push_many(self, jobs: Iterable[Job], *, if_absent: bool = False,
                  durable: Union[bool, float] = False) -> List[float]:
        """Push many jobs, pipelined; return their due times in order.

        Every job is checked before anything is sent; then push_many.lua (or
        push_many_topic.lua) takes 100 per call, 10 calls per round trip: one
        call's jobs are atomic together, the batch is not. With
        ``if_absent=True`` the jobs whose id is taken are not written, the
        others are; :class:`IdTakenError` then lists the taken ids (``.taken``)
        and every job's due time (``.due``, None for a taken one).
        """
        return self._drive(_ops.push_many(self._keys, jobs, if_absent), durable)

    def pop(self, topic: str) -> Optional[Message]:
        """Take the next ready job of ``topic``, or None if there is none.

        The job is deleted from Redis as it is handed out (at most once).
        """
        return self._drive(_ops.pop(self._keys, topic))

    def bpop(self, topic: str, timeout: float) -> Optional[Message]:
        """Like :meth:`pop`, but wait up to ``timeout`` seconds (0 = forever,
        whatever the client's socket timeout) for a job; None when the time is up."""
        return self._drive(_ops.bpop(self._keys, topic, timeout))

    def remove(self, id: str, topic: Optional[str] = None) -> bool:
        """Cancel job ``id``; True if there was something to cancel (a job
        already popped cannot be recalled). ``topic``: the job's, which the
        per-topic layout needs (its ids are per topic)."""
        return self._drive(_ops.remove(self._keys, id, topic))

    # ------------------------------------------------------------------
    # at least once: reserve / ack (docs/PROTOCOL.md, "Reserve and ack")

    def reserve(self, topic: str, ttr: float) -> Optional[ReservedMessage]:
        """Take the next ready job of ``topic`` reserved for ``ttr`` seconds, or None.

        The job stays in Redis, invisible to other consumers, until
        :meth:`ack` (done), :meth:`release` (try again) or :meth:`bury` (give
        up); if none comes within ``ttr`` (rounded to the millisecond), the
        server counts a failed attempt and delivers it again. So a worker that
        dies loses nothing, and a job must be safe to run twice.
        """
        return self._drive(_ops.reserve(self._keys, topic, ttr))

    def reserve_many(self, topic: str, ttr: float, n: int,
                     acks: Iterable[Union[ReservedMessage, str, Tuple[str, Optional[str]]]] = ()
                     ) -> Tuple[List[bool], List[ReservedMessage]]:
        """Ack ``acks``, then reserve up to ``n`` (at most 1000) ready jobs of ``topic``, in one script call.

        Returns ``(acked, jobs)``: a bool per ack, as :meth:`ack` returns, and
        the jobs reserved, as :meth:`reserve` returns them. An ack is a
        :class:`ReservedMessage`, an id, or an ``(id, receipt)`` pair;
        ``n=0`` only acks. Never waits: see :meth:`breserve`.
        """
        return self._drive(_ops.reserve_many(self._keys, topic, ttr, n, acks))

    def breserve(self, topic: str, ttr: float, timeout: float) -> Optional[ReservedMessage]:
        """Like :meth:`reserve`, but wait up to ``timeout`` seconds (0 = forever) for a job.

        None when the time is up. The wait (``BLMOVE`` of the ready queue onto
        itself) takes nothing, so a worker dying before it reserves loses no job.
        """
        return self._drive(_ops.breserve(self._keys, topic, ttr, timeout))

    def ack(self, job: Union[ReservedMessage, str], receipt: Optional[str] = None, *,
            topic: Optional[str] = None) -> bool:
        """The job is done: delete it. True if the reservation was still held.

        ``job`` is what :meth:`reserve` returned (only that reservation is
        acked), or an id with its ``receipt`` if known (else whichever
        reservation is current). False means nothing changed: acked already,
        or the reservation ran out and the job went to another worker, or the
        id was pushed again. ``topic``: the job's, for a job given by id in
        the per-topic layout.
        """
        return self._drive(_ops.ack(self._keys, job, receipt, topic))

    def touch(self, job: Union[ReservedMessage, str], ttr: float, receipt: Optional[str] = None, *,
              topic: Optional[str] = None) -> Optional[float]:
        """Still working on it: the reservation's deadline becomes ``ttr`` seconds from now.

        The deadline is set, not added to, and the attempts do not change.
        Returns the new deadline (Unix seconds, Redis's clock), or None when
        the reservation was not held. ``job``, ``receipt`` and ``topic`` as in
        :meth:`ack`.
        """
        return self._drive(_ops.touch(self._keys, job, ttr, receipt, topic))

    def release(self, job: Union[ReservedMessage, str], delay: Optional[float] = None, receipt: Optional[str] = None, *,
                error: Optional[str] = None, topic: Optional[str] = None) -> bool:
        """A failed attempt: give the job back for a retry. True if the reservation was held.

        The job is due again after ``delay`` seconds, or its backoff without
        one; a job out of ``max_attempts`` goes to dead letters instead.
        ``error`` says why the attempt failed (a Worker sends ``"ValueError:
        bad order"``); its first 1000 bytes are kept as the job's last error.
        ``job``, ``receipt`` and ``topic`` as in :meth:`ack`.
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

        None when the job is not waiting (ready, reserved, dead, gone): this
        never creates or brings back a job. ``topic`` as in :meth:`remove`.
        """
        return self._drive(_ops.reschedule(self._keys, id, delay, topic))

    def dead_letters(self, topic: str, start: int = 0, count: int = 100) -> List[DeadLetter]:
        """List ``topic``'s dead letters, newest first: ``count`` (1 to 1000)
        entries from position ``start`` (fewer when jobs were removed or
        pushed again since they died)."""
        return self._drive(_ops.dead_letters(self._keys, topic, start, count))

    def requeue_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Give dead letters of ``topic`` a new start (due now, attempts 0);
        ``ids`` picks which, None all of them. Returns how many."""
        return self._drive(_ops.dead_take(self._keys, "requeue", topic, ids))

    def purge_dead(self, topic: str, ids: Optional[Iterable[str]] = None) -> int:
        """Delete dead letters of ``topic`` for good (``ids`` as in :meth:`requeue_dead`); returns how many."""
        return self._drive(_ops.dead_take(self._keys, "purge", topic, ids))

    # ------------------------------------------------------------------
    # flow control (docs/PROTOCOL.md, "Flow control (pause)"; rate limits: docs/design/flow-control.md §5)

    def pause(self, topic: str) -> bool:
        """Pause ``topic``: nothing of it is handed out until :meth:`resume`.

        Returns True when this call paused it, False when it was paused
        already (its pause time is kept). Jobs keep being pushed and coming
        due; pop, reserve and their waits give nothing (a waiting
        :meth:`bpop` or :meth:`breserve` goes on waiting), a Worker starts
        nothing, and reservations held go on to their ack. In the classic
        layout the topic is also listed for the server, which sets its due
        jobs aside until the resume, so they hold up no other topic.
        """
        return self._drive(_ops.pause(self._keys, topic))

    def resume(self, topic: str) -> bool:
        """Lift ``topic``'s pause: its jobs are handed out again, in due order.

        Returns True when this call resumed it, False when it was not paused
        (then nothing is written). Every :meth:`bpop` / :meth:`breserve` (and
        Worker) waiting on the topic wakes at once, and the server is told
        (on the wake channel), so held jobs move without waiting for its next tick.
        """
        return self._drive(_ops.resume(self._keys, topic))

    def is_paused(self, topic: str) -> bool:
        """Whether ``topic`` is paused (by :meth:`pause`, ``delayer pause`` or the HTTP API)."""
        return self._drive(_ops.is_paused(self._keys, topic))

    def flow(self, topic: str) -> FlowState:
        """``topic``'s flow control, read only: paused since when (None:
        running), its rate limit (None: none), how many due jobs the pause or
        the limit holds back, Redis's clock."""
        return self._drive(_ops.flow(self._keys, topic))

    def set_rate_limit(self, topic: str, per_second: float, burst: Optional[int] = None) -> FlowState:
        """Limit ``topic`` to ``per_second`` jobs becoming ready per second.

        The limit paces jobs becoming ready (the server moving due jobs to the
        ready queue), for every server at once: in any ``t`` seconds at most
        ``burst + per_second * t`` of them. ``burst`` (None: one second's
        worth, at least 1) is how many may become ready at once after a quiet
        spell. Due jobs over the limit wait, in due order, and count as
        ``held``; jobs already ready go out at consumer speed. ``per_second``
        may be a fraction (0.5: one job every two seconds); 0 is refused
        (:class:`InvalidArgument`: pause the topic instead, :meth:`pause`), as
        are values out of range, in the words of the script that checks them.
        A pause wins over a limit; at the resume the backlog drains at the limit.

        Setting it again replaces the rate and burst (the bucket keeps what it
        held, at most the new burst). Returns the topic's state after the call
        (``changed``: the rate or burst is new); the server is told at once.
        """
        return self._drive(_ops.set_rate_limit(self._keys, topic, per_second, burst))

    def clear_rate_limit(self, topic: str) -> bool:
        """Drop ``topic``'s rate limit: a backlog it held drains at full speed.

        Returns True when the topic had a limit, False when it had none (then
        nothing is written).
        """
        return self._drive(_ops.clear_rate_limit(self._keys, topic))

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

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()
