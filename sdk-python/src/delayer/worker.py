"""The thread Worker: runs a handler per topic on N threads, so that users
need not write (and get wrong) their own consumer loop.

Only I/O and threads live here; what to fetch, when to wait, which acks to
send and which reservations to touch is decided by
:mod:`delayer._worker_core`, shared with the asyncio Worker.
"""

from __future__ import annotations

import functools
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, TypeVar, cast

from . import _eviction
from . import _worker_core as core
from ._trace import consumer_span
from ._worker_core import STOPPED_ERROR, Await, Fetch, Idle, Pause, Policy, Start
from ._worker_hooks import WorkerHooks, call_hook, error_text, overridden
from .client import Delayer
from .errors import DelayerError
from .models import Message

__all__ = ["Worker", "Delivery", "WorkerHooks"]

F = TypeVar("F", bound=Callable[["Delivery"], Any])


@dataclass(eq=False)
class Delivery(core.Delivery):
    """A job handed to a handler: ``id``, ``topic``, ``body``, ``text``,
    ``attempts``, the raw ``message``, and :meth:`extend`."""

    _worker: Optional["Worker"] = field(default=None, repr=False)

    def extend(self, ttr: Optional[float] = None) -> Optional[float]:
        """Still working: the reservation now runs out ``ttr`` seconds from now
        (default: the topic's ttr), and the worker keeps touching it every
        half ``ttr`` after. Returns the new deadline (Unix seconds, Redis's
        clock), or None when the reservation is gone (its ttr ran out: the
        job may run elsewhere). The worker touches a long handler's
        reservation by itself; extend is for a handler that knows it needs
        longer than its ttr between two touches (a single long call)."""
        assert self._worker is not None
        ttr = self.ttr if ttr is None else ttr
        with self._worker._calls:
            deadline = self._worker.client.touch(self.reserved, ttr)
        if deadline is None:
            self._worker._core.forget(self)
        else:
            self._worker._core.touched(self, time.monotonic(), ttr)
        return deadline


class Worker:
    """Runs a handler per topic on ``concurrency`` threads.

    ``worker.handle("email", send_email)`` (or ``@worker.handler("email")``),
    then ``worker.run()``: it blocks until :meth:`stop`, SIGTERM or SIGINT.

    At least once (the default), each job is reserved for ``ttr`` seconds;
    a handler that returns acks it, one that raises releases it with its
    backoff and records ``"ClassName: message"`` as its last error (after
    ``max_attempts`` it goes to dead letters). A reservation whose handler
    runs past half its ttr is touched. ``at_most_once=True`` pops instead:
    a job is gone once handed out, whatever its handler does.

    A stop takes no new jobs, lets running handlers finish for up to
    ``grace`` seconds, then releases the jobs of those still running (due at
    once, for another worker). When Redis is lost the worker tries again,
    0.1 s after the first failure, doubling up to 1 s. Topics are served in
    turn. ``hooks`` (a :class:`WorkerHooks`) hears about every job and
    every lost connection, for logging and metrics.
    """

    def __init__(
        self,
        client: Delayer,
        *,
        concurrency: int = 10,
        ttr: float = 60.0,
        at_most_once: bool = False,
        grace: float = 25.0,
        hooks: Optional[WorkerHooks] = None,
    ) -> None:
        self.client = client
        self._reconnects = client._reconnects
        lock = threading.RLock()  # the Core takes it directly: a Condition's enter is a Python call
        self._cond = threading.Condition(lock)
        self.hooks = hooks if hooks is not None else WorkerHooks()
        settings = core.check_settings(concurrency, ttr, at_most_once, grace)
        self._core = core.Core(settings, self.hooks, lock, functools.partial(Delivery, _worker=self))
        self._handlers: Dict[str, Callable[[Delivery], Any]] = {}
        self._jobs: "queue.SimpleQueue[Optional[Delivery]]" = queue.SimpleQueue()
        # Runners' calls (release, flush, extend) share a few connections.
        self._calls = threading.BoundedSemaphore(core.RUNNER_CALLS)
        self._abandon = False

    def handle(self, topic: str, handler: Callable[[Delivery], Any], *, ttr: Optional[float] = None) -> None:
        """Run ``handler(job)`` for each job of ``topic`` (``ttr``: this topic's, else the worker's)."""
        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        self._handlers[self._core.register(topic, ttr, self.client.keys.layout)] = handler

    def handler(self, topic: str, *, ttr: Optional[float] = None) -> Callable[[F], F]:
        """Decorator form of :meth:`handle`."""

        def register(fn: F) -> F:
            self.handle(topic, fn, ttr=ttr)
            return fn

        return register

    def stop(self) -> None:
        """Ask the worker to stop (from any thread or a signal handler); :meth:`run` returns once it has.

        Only a flag is set (a signal handler must take no lock the
        interrupted code may hold); every wait of the worker looks at it at
        least once a second.
        """
        self._core.stopping = True

    def run(self, *, signals: bool = True) -> None:
        """Work until :meth:`stop` (or, with ``signals``, SIGTERM / SIGINT, when
        run on the main thread); then stop gracefully and return."""
        settings = self._core.settings
        self._core.check_ready()
        previous: Dict[signal.Signals, Any] = {}
        if signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        runners = [threading.Thread(target=self._runner, daemon=True) for _ in range(settings.concurrency)]
        keeper_done = threading.Event()
        keeper = threading.Thread(target=self._keeper, args=(keeper_done,), daemon=True)
        try:
            for t in runners:
                t.start()
            if not settings.at_most_once:
                keeper.start()
            # The other fetch loops on threads of their own, one on this thread.
            failed: List[BaseException] = []
            fetchers = [threading.Thread(target=self._fetch, args=(failed,), daemon=True)
                        for _ in range(core.fetch_loops(settings.concurrency) - 1)]
            for t in fetchers:
                t.start()
            self._fetch(failed)
            for t in fetchers:
                t.join()
            abandoned = self._wind_down()
            if failed:
                raise failed[0]
        finally:
            self.stop()
            keeper_done.set()
            for _ in runners:
                self._jobs.put(None)
            for sig, handler in previous.items():
                if handler is not None:  # None: set outside Python, cannot be put back
                    signal.signal(sig, handler)
        call_hook(self.hooks.stopped, abandoned)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        self.stop()

    # -- the fetch loop's I/O -------------------------------------------

    def _fetch(self, failed: List[BaseException]) -> None:
        """Drive one fetch loop; a failure (a bug: Redis's are handled in the
        loop) stops the worker and is raised by :meth:`run`."""
        loop = self._core.fetch_loop()
        try:
            step = next(loop)
            while True:
                try:
                    reply = self._do(step)
                except DelayerError as e:
                    step = loop.throw(e)
                    continue
                step = loop.send(reply)
        except StopIteration:
            return
        except BaseException as e:
            failed.append(e)
            self.stop()

    def _do(self, step: core.Action) -> Any:
        c = self._core
        if self.client._reconnects != self._reconnects:  # the client made a new connection
            self._reconnects = self.client._reconnects
            c.reconnected()
        if isinstance(step, Fetch):
            if not c.settings.at_most_once:
                return self.client.reserve_many(step.topic, step.ttr, step.n, [d.reserved for d in step.acks])
            popped: List[Message] = []
            try:
                while len(popped) < step.n:
                    m = self.client.pop(step.topic)
                    if m is None:
                        break
                    popped.append(m)
            except DelayerError:
                if not popped:
                    raise
            return None, popped  # jobs popped before a failure are gone from Redis: run them
        if isinstance(step, Await):
            if c.settings.at_most_once:
                return self.client.bpop(step.topic, step.seconds)
            return self.client.breserve(step.topic, step.ttr, step.seconds)
        if isinstance(step, Idle):
            with self._cond:
                c.want = step.want
                if not c.enough():
                    self._cond.wait(step.seconds)
                c.want = 0
            return None
        if isinstance(step, Pause):
            deadline = time.monotonic() + step.seconds
            while not c.stopping and time.monotonic() < deadline:
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            return None
        if isinstance(step, Start):
            for d in step.deliveries:
                self._jobs.put(cast(Delivery, d))  # made by the Core's make: this Delivery
            return None
        if isinstance(step, Policy):
            return self.client._drive(_eviction.read())
        raise TypeError(f"unknown worker step {step!r}")

    def _wind_down(self) -> int:
        """After the fetch loop: wait up to the grace period for the running
        handlers, then release what is left. Returns how many were left."""
        c = self._core
        call_hook(self.hooks.stopping, c.in_flight)
        deadline = time.monotonic() + c.settings.grace
        with self._cond:
            while not c.settled() and time.monotonic() < deadline:
                self._cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            left = c.in_flight
            self._abandon = True
        for d in c.unfinished():
            self._give_back(d, STOPPED_ERROR)
            call_hook(self.hooks.job_released_at_stop, d)
        return left

    def _give_back(self, d: core.Delivery, error: Optional[str]) -> None:
        """Release ``d`` at once (a stop): another worker may take it."""
        try:
            with self._calls:
                held = self.client.release(d.reserved, delay=0, error=error)
            if not held:
                call_hook(self.hooks.job_lost, d, "release")
        except DelayerError as e:
            call_hook(self.hooks.connection_lost, e, 0.0)

    # -- handler threads ------------------------------------------------

    def _runner(self) -> None:
        c = self._core
        at_least_once = not c.settings.at_most_once
        # Hooks left as WorkerHooks' do-nothing defaults cost nothing per job.
        started = overridden(self.hooks, "job_started")
        succeeded = overridden(self.hooks, "job_succeeded")
        while True:
            d = self._jobs.get()
            if d is None:
                return
            if self._abandon:  # handed over but never started: give it back
                if at_least_once:
                    self._give_back(d, None)
                    call_hook(self.hooks.job_released_at_stop, d)
                c.finish(d, False)
                continue
            handler = self._handlers[d.topic]
            start = time.monotonic()
            c.begin(d, start)
            if started is not None:
                call_hook(started, d)
            try:
                with consumer_span(d.message):
                    handler(d)
            except BaseException as e:  # a handler's failure is the job's, never the worker's
                if at_least_once:
                    self._release(d, e)
                if c.finish(d, False)[1]:
                    self._wake()
                call_hook(self.hooks.job_failed, d, e, time.monotonic() - start)
                continue
            # Before its ack can be sent (by a fetch loop or the flush): the
            # hooks hear of a job's end before its ack, in every SDK.
            if succeeded is not None:
                call_hook(succeeded, d, time.monotonic() - start)
            flush, wake = c.finish(d, at_least_once)
            if wake:
                self._wake()
            if flush:
                self._flush()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _release(self, d: Delivery, e: BaseException) -> None:
        try:
            with self._calls:
                held = self.client.release(d.reserved, error=error_text(e))
            if not held:
                call_hook(self.hooks.job_lost, d, "release")
        except DelayerError as lost:
            # The reservation runs out and the server retries the job.
            call_hook(self.hooks.connection_lost, lost, 0.0)

    def _flush(self) -> None:
        """Send the acks waiting, while no fetch is coming to carry them."""
        c = self._core
        topic = next(iter(c.ttrs))  # any: a call that reserves nothing
        while True:
            batch = c.flush_batch()
            if not batch:
                break
            try:
                with self._calls:
                    acked, _ = self.client.reserve_many(topic, c.ttrs[topic], 0, [d.reserved for d in batch])
            except DelayerError:
                c.flush_failed(batch)  # the next fetch sends them again
                break
            c.report_acks(batch, acked)
        self._wake()  # a stop may be waiting for the flush

    # -- the keeper: touches long-running reservations -------------------

    def _keeper(self, done: threading.Event) -> None:
        c = self._core
        while not done.is_set():
            due, sleep = c.touches(time.monotonic())
            for d in due:
                try:
                    deadline = self.client.touch(d.reserved, d.ttr)
                except DelayerError:
                    d.touch_at = time.monotonic() + min(1.0, d.ttr / 10)  # try again soon
                    continue
                if deadline is None:
                    if c.forget(d):  # else the handler ended and acked meanwhile
                        call_hook(self.hooks.job_lost, d, "touch")
                else:
                    c.touched(d, time.monotonic())
                    call_hook(self.hooks.job_touched, d)
            done.wait(sleep)
