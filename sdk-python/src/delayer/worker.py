"""The thread Worker: runs a handler per topic on N threads, so that users
need not write (and get wrong) their own consumer loop. Only threads and I/O
live here; every decision is :mod:`delayer._worker_core`'s.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Optional, TypeVar, cast

from . import _worker_core as core, _worker_hooks
from ._trace import consumer_span
from ._worker_core import STOPPED_ERROR, Idle, Pause, Start
from ._worker_hooks import WorkerHooks, call_hook, error_text, overridden
from .client import Delayer
from .errors import DelayerError

__all__ = ["Worker", "Delivery", "WorkerHooks"]

T = TypeVar("T")


@dataclass(eq=False)
class Delivery(_worker_hooks.Delivery):
    """A job handed to a handler: ``id``, ``topic``, ``body``, ``text``,
    ``attempts``, the raw ``message``, and :meth:`extend`."""

    _worker: Optional["Worker"] = field(default=None, repr=False)

    def extend(self, ttr: Optional[float] = None) -> Optional[float]:
        """Still working: the reservation now runs out ``ttr`` seconds from now
        (default: the topic's), and is touched every half ``ttr`` after.
        Returns the new deadline, or None when the reservation is gone (the
        job may run elsewhere). The worker touches long handlers' jobs by
        itself; this is for one longer than its ttr between two touches."""
        assert self._worker is not None
        return self._worker._send(self._worker._core.extend(self, ttr))


class Worker(core.WorkerBase[Callable[[Delivery], Any]]):
    """Runs a handler per topic on ``concurrency`` threads.

    ``worker.handle("email", send_email)`` (or ``@worker.handler("email")``),
    then ``worker.run()``: it blocks until :meth:`stop`, SIGTERM or SIGINT.

    At least once (the default), each job is reserved for ``ttr`` seconds
    (touched past half of it); a handler that returns acks it, one that
    raises releases it with its backoff and ``"ClassName: message"`` as its
    last error. ``at_most_once=True`` pops instead.

    A stop takes no new jobs, lets running handlers finish for up to
    ``grace`` seconds, then releases the jobs of those still running. When
    Redis is lost the worker tries again after 0.1 s, doubling up to 1 s.
    Topics are served in turn. ``hooks`` (a :class:`WorkerHooks`) hears of
    every job and lost connection.
    """

    def __init__(self, client: Delayer, *, concurrency: int = 10, ttr: float = 60.0, at_most_once: bool = False,
                 grace: float = 25.0, hooks: Optional[WorkerHooks] = None) -> None:
        lock = threading.RLock()  # the Core takes it directly: a Condition's enter is a Python call
        self._cond = threading.Condition(lock)
        self._resumed = threading.Condition(lock)  # a woken fetch loop runs again (see _wake)
        super().__init__(client, core.check_settings(concurrency, ttr, at_most_once, grace), hooks, lock, Delivery)
        self._jobs: "queue.SimpleQueue[Optional[Delivery]]" = queue.SimpleQueue()
        # Runners' calls (release, flush, extend) share a few connections.
        self._calls = threading.BoundedSemaphore(core.RUNNER_CALLS)
        self._abandon = False

    def stop(self) -> None:
        """Ask the worker to stop (from any thread or a signal handler); :meth:`run`
        returns once it has. Only a flag is set: a signal handler must take no lock."""
        self._core.stopping = True

    def run(self, *, signals: bool = True) -> None:
        """Work until :meth:`stop` (or, with ``signals``, SIGTERM / SIGINT, when
        run on the main thread); then stop gracefully and return."""
        settings = self._core.settings
        self._core.check_ready()
        previous: Dict[signal.Signals, Any] = {}
        if signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop())
        runners = [threading.Thread(target=self._runner, daemon=True) for _ in range(settings.concurrency)]
        keeper_done = threading.Event()
        keeper = threading.Thread(target=self._keeper, args=(keeper_done,), daemon=True)
        # The other fetch loops on threads of their own, one on this thread.
        failed: List[BaseException] = []
        fetchers = [threading.Thread(target=self._fetch, args=(failed,), daemon=True)
                    for _ in range(core.fetch_loops(settings.concurrency) - 1)]
        try:
            if not settings.at_most_once:
                keeper.start()
            for t in runners + fetchers:
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

    # -- the fetch loop's I/O -------------------------------------------

    def _fetch(self, failed: List[BaseException]) -> None:
        """Drive one fetch loop; a failure (a bug: Redis's are handled in it) stops the worker, and run() raises it."""
        try:
            self._run(self._core.fetch_loop())
        except BaseException as e:
            failed.append(e)
            self.stop()

    def _run(self, steps: Generator[core.Action, Any, T]) -> T:
        """Carry out ``steps`` (shared with the asyncio Worker) to their result."""
        try:
            step = next(steps)
            while True:
                try:
                    reply = self._do(step)
                except DelayerError as e:
                    step = steps.throw(e)
                    continue
                step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result

    def _do(self, step: core.Action) -> Any:
        c = self._core
        self._noticed()
        if not isinstance(step, tuple):
            return step(self.client)
        if isinstance(step, Idle):
            with self._cond:
                c.want = step.want
                if not c.enough():
                    self._cond.wait(step.seconds)
                c.want = 0
                self._resumed.notify_all()
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
            self._send(c.give_back(d, STOPPED_ERROR, True))
        return left

    def _send(self, calls: core.Calls[T]) -> T:
        """A runner's calls, on the runners' share of connections."""
        with self._calls:
            return self._run(calls)

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
                    self._send(c.give_back(d, None, True))
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
                    self._send(c.give_back(d, error_text(e), False))
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
                self._send(c.flush())
                self._wake()  # a stop may be waiting for the flush

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
            if self._core.ways > 1:  # the woken fetch loop first (this runner would keep the GIL while jobs are queued)
                self._resumed.wait_for(lambda: self._core.want >= 0, 0.002)

    # -- the keeper: touches long-running reservations -------------------

    def _keeper(self, done: threading.Event) -> None:
        while not done.is_set():
            done.wait(self._run(self._core.keep()))
