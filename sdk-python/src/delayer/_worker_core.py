"""What the thread and asyncio Workers share: everything that does no I/O.

A Worker is fetch loops feeding N handler runners, plus a keeper touching
long reservations. The loops, and every call a runner or the keeper makes,
are generators of steps here (as :mod:`delayer._ops`); :mod:`delayer.worker`
and :mod:`delayer.aio_worker` only carry the steps out. The state both touch
lives in :class:`Core`, under the lock the Worker gives it (none for asyncio).
Throughput comes from batching: one reserve.lua call acks the jobs finished
since the last and reserves one per free slot (two calls out, when that is
faster: :meth:`Core.tune`); while a loop waits for a job, a finishing runner
sends the acks, so an ack never waits for a job."""

from __future__ import annotations

import functools
import math
import time
from typing import Any, Callable, ContextManager, Dict, Generator, Generic, List, NamedTuple, Optional, Tuple, TypeVar
from typing import Union

from . import _eviction, _ops
from ._replies import Batch
from ._calls import RESERVE_BATCH
from ._rules import count, ttr_ms
from .errors import DelayerError, InvalidArgument
from .keys import CLASSIC, check_topic
from ._worker_hooks import Delivery, WorkerHooks, call_hook, log, overridden
from .models import Message, ReservedMessage

T = TypeVar("T")
H = TypeVar("H")  # a handler: a function, or an async one
F = TypeVar("F", bound=Callable[..., Any])

#: The longest one idle wait (breserve / bpop) lasts: a stop is noticed within it.
IDLE_WAIT = 1.0
#: Shortest idle wait per topic when a worker serves many topics.
MIN_IDLE_WAIT = 0.1
#: Pauses before trying Redis again: first, doubling up to the most (PROTOCOL.md, "The Worker runtime").
FIRST_PAUSE, MOST_PAUSE = 0.1, 1.0
#: How long a fetch waits for more slots to free up: a batch per round trip.
GATHER = 0.005
#: Fetch loops per Worker (one below concurrency 8): while Redis runs one's call, the other parses.
FETCH_LOOPS = 2
#: Calls to Redis a Worker's runners make at once: redis-py 8's pools hold 100 connections.
RUNNER_CALLS = 16
#: What a handler that did not finish within the grace period is released with.
STOPPED_ERROR = "WorkerStopped: the worker stopped before the handler finished"


def fetch_loops(concurrency: int) -> int:
    return FETCH_LOOPS if concurrency >= 8 else 1


class Settings(NamedTuple):
    """A Worker's checked settings (see :class:`delayer.Worker`)."""

    concurrency: int
    ttr: float
    at_most_once: bool
    grace: float


def check_settings(concurrency: object, ttr: object, at_most_once: object, grace: object) -> Settings:
    n = count("concurrency", concurrency, 1, 10_000)
    ttr_ms(ttr)  # the reserve rules: > 0, at most ten years
    if not isinstance(at_most_once, bool):
        raise InvalidArgument(f"at_most_once must be a bool, not {type(at_most_once).__name__}")
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not math.isfinite(grace) or grace < 0:
        raise InvalidArgument(f"grace must be a number of seconds >= 0, not {grace!r}")
    return Settings(n, float(ttr), at_most_once, float(grace))  # type: ignore[arg-type]


#: A call to the client (the asyncio Worker awaits what it returns): the steps around it are written once.
Call = Callable[[Any], Any]
#: Steps that only call the client: what a runner, the keeper or a fetch does.
Calls = Generator[Call, Any, T]


class Idle(NamedTuple):
    """Wait up to ``seconds`` until ``want`` slots are free (handlers finished) or a stop."""

    want: int
    seconds: float


class Pause(NamedTuple):
    """Wait ``seconds`` (before trying Redis again), unless a stop comes first."""

    seconds: float


class Start(NamedTuple):
    """Hand these deliveries to handlers (one free slot each)."""

    deliveries: List[Delivery]


#: What the fetch loop asks its Worker to do.
Action = Union[Call, Idle, Pause, Start]


class WorkerBase(Generic[H]):
    """What both Workers do without I/O: settings, hooks, handlers by topic."""

    def __init__(self, client: Any, settings: Settings, hooks: Optional[WorkerHooks], lock: ContextManager[Any],
                 delivery: Callable[..., Delivery]) -> None:
        self.client = client
        self._reconnects = client._reconnects
        self.hooks = hooks if hooks is not None else WorkerHooks()
        self._core = Core(settings, self.hooks, lock, functools.partial(delivery, _worker=self))
        self._handlers: Dict[str, H] = {}

    def handle(self, topic: str, handler: H, *, ttr: Optional[float] = None) -> None:
        """Run ``handler(job)`` for each job of ``topic`` (``ttr``: this topic's, else the worker's)."""
        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        self._handlers[self._core.register(topic, ttr, self.client.keys.layout)] = handler

    def handler(self, topic: str, *, ttr: Optional[float] = None) -> Callable[[F], F]:
        """Decorator form of :meth:`handle`."""

        def register(fn: F) -> F:
            self.handle(topic, fn, ttr=ttr)  # type: ignore[arg-type]
            return fn

        return register

    def _noticed(self) -> None:
        """Before a call: the client made a new connection since the last one?"""
        if self.client._reconnects != self._reconnects:
            self._reconnects = self.client._reconnects
            self._core.reconnected()


class Core:
    """A Worker's shared state and fetch loop. Every method that reads or
    changes the state takes ``lock`` itself; hooks run outside it."""

    def __init__(self, settings: Settings, hooks: WorkerHooks, lock: ContextManager[Any],
                 make: Callable[[Union[ReservedMessage, Message], float], Delivery]) -> None:
        self.settings = settings
        self.make = make
        self.hooks = hooks
        self.lock = lock
        self.ttrs: Dict[str, float] = {}  # topic -> ttr, in registration order
        self.in_flight = 0
        self.acks: List[Delivery] = []
        self.awaiting = 0  # fetch loops waiting for a job (they send no acks meanwhile)
        self.closing = False  # the fetch loops are done
        self.flushing = False  # a runner is sending acks (see finish)
        self.running: Dict[int, Delivery] = {}  # id(delivery) -> reservations to touch
        self.want = 0  # the fetch loop waits (Idle) for this many free slots; 0: it does not wait
        self.stopping = False
        self.ways = fetch_loops(settings.concurrency)  # each fetch loop takes its share of the free slots (see tune)
        self._since, self._count, self._period, self._rates = time.monotonic(), 0, -1, [0.0, 0.0]  # see tune
        self._next = 0  # rotation: the topic served first next round
        self._pause = FIRST_PAUSE
        self.policy_due = True  # the eviction policy is read at start and after every reconnect
        self._failed = False
        self._eviction = _eviction.Watch()

    def register(self, topic: object, ttr: Optional[float], layout: str = CLASSIC) -> str:
        t = check_topic(topic, layout)
        if t in self.ttrs:
            raise InvalidArgument(f"topic {t!r} has a handler already")
        if ttr is not None:
            ttr_ms(ttr)
        self.ttrs[t] = self.settings.ttr if ttr is None else float(ttr)
        return t

    # -- handler runners ------------------------------------------------

    def begin(self, d: Delivery, now: float) -> None:
        """A runner starts ``d``: its reservation is touched from half its ttr on."""
        d.started = now
        if not self.settings.at_most_once:
            d.touch_at = now + d.ttr / 2
            with self.lock:
                self.running[id(d)] = d

    def finish(self, d: Delivery, ack: bool) -> Tuple[bool, bool]:
        """A runner is done with ``d`` (``ack``: it succeeded, at least once).
        Returns ``(flush, wake)``: ``flush`` when no fetch is coming to carry
        the acks and this runner must send them (:meth:`flush`: one runner at
        a time); ``wake`` when the fetch loop's Idle wait is over."""
        with self.lock:
            self.running.pop(id(d), None)
            self.in_flight -= 1
            if ack:
                self.acks.append(d)
                if (self.awaiting or self.closing) and not self.flushing:
                    self.flushing = True
                    return True, self.enough()
            return False, self.enough()

    def flush_batch(self) -> List[Delivery]:
        """The flushing runner's next acks to send; empty: it is done flushing."""
        with self.lock:
            batch = self._take_acks()
            if not batch:
                self.flushing = False
            return batch

    def flush_failed(self, batch: List[Delivery]) -> None:
        """The flush call failed: the acks wait for the next fetch (or flush)."""
        with self.lock:
            self.acks[:0] = batch
            self.flushing = False

    def enough(self) -> bool:
        """Whether an Idle wait is over (lock held); then ``want`` is -1 until its waiter runs (0: none waits)."""
        if self.stopping or (self.want > 0 and self.settings.concurrency - self.in_flight >= self.want):
            self.want = -1 if self.want > 0 else 0
            return True
        return False

    def forget(self, d: Delivery) -> bool:
        """Touch ``d`` no more; whether its handler was still running (else the touch met its ack)."""
        with self.lock:
            return self.running.pop(id(d), None) is not None

    def requeue_acks(self, acks: List[Delivery]) -> None:
        """Acks whose call failed go with the next (sent twice, an ack by receipt finds nothing)."""
        with self.lock:
            self.acks[:0] = acks

    # -- the keeper -----------------------------------------------------

    def touches(self, now: float) -> Tuple[List[Delivery], float]:
        """Reservations to touch now (from half their ttr on), and how long the
        keeper may sleep: at most a quarter of the shortest ttr, so that a job
        started meanwhile is touched before 3/4 of its ttr."""
        with self.lock:
            running = list(self.running.values())
        due = [d for d in running if d.touch_at <= now]
        nxt = min((d.touch_at for d in running if d.touch_at > now), default=math.inf)
        shortest = min(self.ttrs.values(), default=self.settings.ttr)
        return due, max(0.001, min(nxt - now, shortest / 4, IDLE_WAIT))

    def unfinished(self) -> List[Delivery]:
        """The deliveries whose handler still runs (to release at the end of a stop)."""
        with self.lock:
            return list(self.running.values())

    # -- the fetch loop -------------------------------------------------

    def _order(self) -> List[str]:
        """Every topic once, starting with the next in turn (fair across topics)."""
        topics = list(self.ttrs)
        start = self._next % len(topics)
        self._next = start + 1
        return topics[start:] + topics[:start]

    def _take_acks(self) -> List[Delivery]:
        """The acks waiting, as many as one call takes."""
        with self.lock:
            acks, self.acks = self.acks[:RESERVE_BATCH], self.acks[RESERVE_BATCH:]
        return acks

    def settled(self) -> bool:
        """Whether no handler runs and no runner is flushing acks (a stop waits for it)."""
        with self.lock:
            return self.in_flight == 0 and not self.flushing

    def _io(self, calls: Calls[Any]) -> Generator[Action, Any, Tuple[bool, Any]]:
        """Make ``calls``; on a Redis failure report it and pause (doubling up
        to :data:`MOST_PAUSE`), then return ``(False, None)``."""
        try:
            reply = yield from calls
        except InvalidArgument:
            raise  # a bug, not Redis: trying again would not help
        except DelayerError as e:
            pause, self._pause = self._pause, min(self._pause * 2, MOST_PAUSE)
            self._failed = True
            self._eviction.outage()
            call_hook(self.hooks.connection_lost, e, pause)
            yield Pause(pause)
            return False, None
        self._pause = FIRST_PAUSE
        if self._failed:
            self._failed = False
            self.reconnected()
            call_hook(self.hooks.reconnected)
        return True, reply

    def reconnected(self) -> None:
        """Redis answers on a new connection: the eviction policy is read again."""
        with self.lock:
            self.policy_due = True

    def _check_policy(self) -> Generator[Action, Any, None]:
        """Read and judge the eviction policy, when due (:mod:`delayer._eviction`)."""
        with self.lock:
            due, self.policy_due = self.policy_due, False
        if due:
            ok, policy = yield from self._io(_one(lambda c: c._drive(_eviction.read())))
            if ok:
                self._eviction.report(policy, log)

    def _fetched(self, topic: str, acks: List[Delivery], reply: Any) -> List[Delivery]:
        """Report the acks of a fetch; make deliveries of its jobs (one slot each)."""
        acked, messages = reply
        self.report_acks(acks, acked)
        ttr = 0.0 if self.settings.at_most_once else self.ttrs[topic]
        return [self.make(m, ttr) for m in messages]

    def tune(self, got: int) -> None:
        """Count ``got`` jobs fetched. Of 20 periods of 0.2 s, the 1st splits the slots (two calls out: Redis runs
        one while Python starts the other's jobs), the 2nd does not (half the calls); the rest split if 10 % faster."""
        with self.lock:
            now, self._count = time.monotonic(), self._count + got
            if now - self._since < 0.2:
                return
            if 0 <= self._period < 2:  # (period -1: the start, split, not weighed)
                self._rates[self._period] = self._count / (now - self._since)
            self._since, self._count, self._period = now, 0, (self._period + 1) % 20
            split = self._period == 0 or self._period > 1 and self._rates[0] > 1.1 * self._rates[1]
            self.ways = fetch_loops(self.settings.concurrency) if split else 1

    def report_acks(self, acks: List[Delivery], acked: Optional[List[bool]]) -> None:
        """Tell the hooks which acks found their reservation held."""
        if acks and acked:
            on_acked = overridden(self.hooks, "job_acked")
            for d, held in zip(acks, acked):
                if not held:
                    call_hook(self.hooks.job_lost, d, "ack")
                elif on_acked is not None:
                    call_hook(on_acked, d)

    def check_ready(self) -> None:
        """Before a run: there must be something to run."""
        if not self.ttrs:
            raise InvalidArgument("the worker has no handler: register one per topic with handle()")

    def fetch_loop(self) -> Generator[Action, Any, None]:
        """One fetch loop, until :attr:`stopping`; then it sends the acks left."""
        # Fetch once half the slots are free (or after GATHER): one half's jobs come while the other half runs.
        half = max(1, self.settings.concurrency // 2)
        gathered = False
        while not self.stopping:
            yield from self._check_policy()
            with self.lock:
                free = self.settings.concurrency - self.in_flight
                busy = self.in_flight > 0
            if free <= 0:
                yield Idle(1, IDLE_WAIT)
                continue
            if free < half and busy and not gathered:
                gathered = True
                yield Idle(half, GATHER)
                continue
            gathered = False
            got, ok = 0, True
            acks = self._take_acks()
            topics = self._order()
            claimed: Dict[str, object] = {}  # topic -> its claim's outcome this round (None, or a paused one's Gate)
            per_topic = max(1, math.ceil(self.settings.concurrency / self.ways / len(topics)))
            for topic in topics:
                # Slots are claimed before the call: another fetch loop sees them taken.
                with self.lock:
                    n = max(0, min(self.settings.concurrency - self.in_flight, per_topic, RESERVE_BATCH))
                    self.in_flight += n
                if n == 0 and not acks:
                    break
                ok, reply = yield from self._io(self._fetch(topic, n, acks, claimed))
                if not ok:
                    with self.lock:
                        self.in_flight -= n
                    self.requeue_acks(acks)
                    break
                deliveries = self._fetched(topic, acks, reply)
                self.tune(len(deliveries))
                acks = []
                with self.lock:
                    self.in_flight -= n - len(deliveries)
                if deliveries:
                    got += len(deliveries)
                    yield Start(deliveries)
                if got >= free or self.stopping:
                    break
            if got or not ok or self.stopping:
                continue
            # Nothing ready anywhere: wait for a job of the next topic; finishing runners send the acks.
            with self.lock:
                if self.acks or self.in_flight >= self.settings.concurrency:
                    continue
                self.awaiting += 1
                self.in_flight += 1
            topic = topics[0]
            wait = max(MIN_IDLE_WAIT, IDLE_WAIT / len(topics))
            ttr = self.ttrs[topic]
            # The wait goes on from the fetch's claim (the ready queue, or a paused topic's gate): not a second one.
            after = claimed.get(topic, _ops.CLAIM)
            if self.settings.at_most_once:
                ok, message = yield from self._io(_one(lambda c: c._drive(_ops.bpop(c.keys, topic, wait, after))))
            else:
                ok, message = yield from self._io(
                    _one(lambda c: c._drive(_ops.breserve(c.keys, topic, ttr, wait, after))))
            with self.lock:
                self.awaiting -= 1
                if not ok or message is None:
                    self.in_flight -= 1
            if ok and message is not None:
                yield Start(self._fetched(topic, [], (None, [message])))
        # Stopping: send the acks waiting (a few tries: an ack lost here means the job runs again).
        with self.lock:
            self.closing = True
        topic = next(iter(self.ttrs))
        tries = 0
        while tries < 5:
            acks = self._take_acks()
            if not acks:
                break
            ok, reply = yield from self._io(self._fetch(topic, 0, acks, {}))
            if ok:
                self._fetched(topic, acks, reply)
            else:
                self.requeue_acks(acks)
                tries += 1

    def _fetch(self, topic: str, n: int, acks: List[Delivery],
               claimed: Dict[str, object]) -> Calls[Tuple[Optional[List[bool]], List[Any]]]:
        """Ack ``acks`` and reserve up to ``n`` jobs of ``topic`` in one call; at most once, pop up to ``n``: the
        ack results (None) and the jobs. ``claimed[topic]``: how a claim ended that found none (None, or a Gate)."""
        if not self.settings.at_most_once:
            ttr = self.ttrs[topic]
            held = [d.reserved for d in acks]
            got: Batch = yield lambda c: c._drive(_ops.fetch(c.keys, topic, ttr, n, held))
            if n > 0:  # (n = 0 claimed nothing)
                claimed[topic] = got.paused
            return got.acked, got.jobs
        popped: List[Message] = []
        try:
            while len(popped) < n:
                m = yield lambda c: c._drive(_ops.claim_pop(c.keys, topic))
                if not isinstance(m, Message):
                    claimed[topic] = m
                    break
                popped.append(m)
        except DelayerError:
            if not popped:
                raise
        return None, popped  # jobs popped before a failure are gone from Redis: run them

    # -- what runners and the keeper send -------------------------------

    def give_back(self, d: Delivery, error: Optional[str], at_stop: bool) -> Calls[None]:
        """Release ``d``: its handler failed (its backoff), or at a stop (due at once, for another worker)."""
        try:
            held = yield lambda c: c.release(d.reserved, delay=0 if at_stop else None, error=error)
            if not held:
                call_hook(self.hooks.job_lost, d, "release")
        except DelayerError as e:  # the reservation runs out and the server retries the job
            call_hook(self.hooks.connection_lost, e, 0.0)
        if at_stop:
            call_hook(self.hooks.job_released_at_stop, d)

    def flush(self) -> Calls[None]:
        """Send the acks waiting, while no fetch is coming to carry them."""
        topic = next(iter(self.ttrs))  # any: a call that reserves nothing
        while True:
            batch = self.flush_batch()
            if not batch:
                return
            try:
                acked, _ = yield lambda c: c.reserve_many(topic, self.ttrs[topic], 0, [d.reserved for d in batch])
            except DelayerError:
                self.flush_failed(batch)  # the next fetch sends them again
                return
            self.report_acks(batch, acked)

    def extend(self, d: Delivery, ttr: Optional[float]) -> Calls[Optional[float]]:
        """``d.extend(ttr)``: touch its reservation, and keep touching it every half ``ttr``."""
        ttr = d.ttr if ttr is None else ttr
        deadline: Optional[float] = yield lambda c: c.touch(d.reserved, ttr)
        if deadline is None:
            self.forget(d)
        else:
            d.ttr = ttr
            d.touch_at = time.monotonic() + ttr / 2
        return deadline

    def keep(self) -> Calls[float]:
        """One round of the keeper: touch the reservations due; returns how long it may sleep."""
        due, sleep = self.touches(time.monotonic())
        for d in due:
            try:
                deadline = yield lambda c: c.touch(d.reserved, d.ttr)  # noqa: B023 (called at once)
            except DelayerError:
                d.touch_at = time.monotonic() + min(1.0, d.ttr / 10)  # try again soon
                continue
            if deadline is None:
                if self.forget(d):  # else the handler ended and acked meanwhile
                    call_hook(self.hooks.job_lost, d, "touch")
            else:
                d.touch_at = time.monotonic() + d.ttr / 2
                call_hook(self.hooks.job_touched, d)
        return sleep


def _one(call: Call) -> Calls[Any]:
    """One call as :data:`Calls`."""
    return (yield call)
