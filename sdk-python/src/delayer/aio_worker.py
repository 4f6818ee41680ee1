"""The asyncio Worker (``delayer.aio.Worker``): runs an async handler per
topic on N tasks. Only tasks and I/O live here; every decision is
:mod:`delayer._worker_core`'s, as for the thread Worker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, List, Optional, TypeVar, cast

from . import _worker_core as core, _worker_hooks
from ._trace import consumer_span
from ._worker_core import STOPPED_ERROR, Idle, Pause, Start
from ._worker_hooks import WorkerHooks, call_hook, error_text, overridden
from .errors import DelayerError

if TYPE_CHECKING:  # delayer.aio imports this module to export the Worker
    from .aio import Delayer

__all__ = ["Worker", "Delivery", "WorkerHooks"]

Handler = Callable[["Delivery"], Awaitable[Any]]
T = TypeVar("T")


@dataclass(eq=False)
class Delivery(_worker_hooks.Delivery):
    """A job handed to an async handler; as :class:`delayer.Delivery`, with :meth:`extend` a coroutine."""

    _worker: Optional["Worker"] = field(default=None, repr=False)

    async def extend(self, ttr: Optional[float] = None) -> Optional[float]:
        """Still working: see :meth:`delayer.Delivery.extend`."""
        assert self._worker is not None
        return await self._worker._send(self._worker._core.extend(self, ttr))


class Worker(core.WorkerBase[Handler]):
    """Runs an async handler per topic on ``concurrency`` tasks; the asyncio
    twin of :class:`delayer.Worker`, with the same settings and hooks.

    ``worker.handle("email", send_email)`` with ``async def send_email(job)``,
    then ``await worker.run()``. :meth:`stop` (or SIGTERM / SIGINT, when run
    in the main thread's loop) stops it gracefully; handlers still running
    after ``grace`` seconds are cancelled and their jobs released.
    """

    def __init__(self, client: Delayer, *, concurrency: int = 10, ttr: float = 60.0, at_most_once: bool = False,
                 grace: float = 25.0, hooks: Optional[WorkerHooks] = None) -> None:
        settings = core.check_settings(concurrency, ttr, at_most_once, grace)
        super().__init__(client, settings, hooks, contextlib.nullcontext(), Delivery)  # one thread: nothing to lock
        self._jobs: "collections.deque[Delivery]" = collections.deque()  # handed over, not started
        self._idle: "List[asyncio.Future[None]]" = []  # a runner's each, waiting: cheaper than an asyncio.Queue
        self._waking = False  # an idle runner was woken and has not run yet (see _hand)
        self._wake: Optional[asyncio.Event] = None
        self._stopped: Optional[asyncio.Event] = None
        self._calls: Optional[asyncio.Semaphore] = None  # made in run(): 3.9 binds it to the loop

    def stop(self) -> None:
        """Ask the worker to stop (from the loop's thread: a signal handler, a
        task; from another thread use ``loop.call_soon_threadsafe(worker.stop)``)."""
        self._core.stopping = True
        for event in (self._stopped, self._wake):
            if event is not None:
                event.set()

    async def run(self, *, signals: bool = True) -> None:
        """Work until :meth:`stop` (or, with ``signals``, SIGTERM / SIGINT); then stop gracefully and return."""
        c = self._core
        c.check_ready()
        loop = asyncio.get_running_loop()
        self._wake, self._stopped = asyncio.Event(), asyncio.Event()
        self._calls = asyncio.Semaphore(core.RUNNER_CALLS)
        if c.stopping:
            self._stopped.set()
        installed: List[signal.Signals] = []
        if signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, self.stop)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass  # not the main thread, or no signals on this platform
        runners = [loop.create_task(self._runner()) for _ in range(c.settings.concurrency)]
        keeper_done = asyncio.Event()
        keeper = loop.create_task(self._keeper(keeper_done))
        try:
            await asyncio.gather(*(self._run(c.fetch_loop()) for _ in range(core.fetch_loops(c.settings.concurrency))))
            abandoned = await self._wind_down(runners)
        finally:
            self.stop()
            keeper_done.set()
            for task in runners:
                task.cancel()
            await asyncio.gather(keeper, *runners, return_exceptions=True)
            for sig in installed:
                loop.remove_signal_handler(sig)
        call_hook(self.hooks.stopped, abandoned)

    # -- the fetch loop's I/O -------------------------------------------

    async def _run(self, steps: Generator[core.Action, Any, T]) -> T:
        """Carry out ``steps`` (shared with the thread Worker) to their result."""
        try:
            step = next(steps)
            while True:
                try:
                    reply = await self._do(step)
                except DelayerError as e:
                    step = steps.throw(e)
                    continue
                step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result

    async def _do(self, step: core.Action) -> Any:
        c = self._core
        self._noticed()
        if not isinstance(step, tuple):
            return await step(self.client)
        assert self._wake is not None and self._stopped is not None
        if isinstance(step, Idle):
            c.want = step.want
            if not c.enough():
                self._wake.clear()
                await _wait(self._wake, step.seconds)
            c.want = 0
            return None
        if isinstance(step, Pause):
            await _wait(self._stopped, step.seconds)
            return None
        if isinstance(step, Start):
            self._jobs.extend(cast(List[Delivery], step.deliveries))  # made by the Core's make: this Delivery
            self._hand()
            return None
        raise TypeError(f"unknown worker step {step!r}")

    async def _wind_down(self, runners: "List[asyncio.Task[None]]") -> int:
        """After the fetch loop: wait up to the grace period for the running
        handlers, then cancel them and release their jobs. Returns how many."""
        c = self._core
        assert self._wake is not None
        call_hook(self.hooks.stopping, c.in_flight)
        deadline = time.monotonic() + c.settings.grace
        while not c.settled() and time.monotonic() < deadline:
            self._wake.clear()
            await _wait(self._wake, min(0.5, max(0.0, deadline - time.monotonic())))
        left = c.in_flight
        if left:
            for task in runners:
                task.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            if not c.settings.at_most_once:
                for running in c.unfinished():
                    await self._send(c.give_back(running, STOPPED_ERROR, True))
                for waiting in self._jobs:  # handed over, never started (nothing is added now)
                    await self._send(c.give_back(waiting, None, True))
        return left

    async def _send(self, calls: core.Calls[T]) -> T:
        """A runner's calls, on the runners' share of connections (see RUNNER_CALLS)."""
        assert self._calls is not None
        async with self._calls:
            return await self._run(calls)

    # -- handler tasks --------------------------------------------------

    async def _runner(self) -> None:
        c = self._core
        loop = asyncio.get_running_loop()
        at_least_once = not c.settings.at_most_once
        started = overridden(self.hooks, "job_started")
        succeeded = overridden(self.hooks, "job_succeeded")
        while True:
            while not self._jobs:  # until _hand wakes this runner
                waiter = loop.create_future()
                self._idle.append(waiter)
                try:
                    await waiter
                finally:
                    self._waking = False
            d = self._jobs.popleft()
            self._hand()  # before a handler that may wait
            handler = self._handlers[d.topic]
            start = time.monotonic()
            c.begin(d, start)
            if started is not None:
                call_hook(started, d)
            try:
                with consumer_span(d.message):
                    await handler(d)
            except asyncio.CancelledError:
                raise  # the end of the grace period (see _wind_down)
            except BaseException as e:  # a handler's failure is the job's, never the worker's (as on threads)
                if at_least_once:
                    await self._send(c.give_back(d, error_text(e), False))
                if c.finish(d, False)[1]:
                    self._set_wake()
                call_hook(self.hooks.job_failed, d, e, time.monotonic() - start)
                continue
            if succeeded is not None:  # before its ack (see delayer.worker)
                call_hook(succeeded, d, time.monotonic() - start)
            flush, wake = c.finish(d, at_least_once)
            if wake:
                self._set_wake()
            if flush:
                await self._send(c.flush())
                self._set_wake()  # a stop may be waiting for the flush

    def _hand(self) -> None:
        """Wake an idle runner for the jobs waiting, unless one is on its way
        (quick handlers wake one or two runners, not one per job; each woken
        runner wakes the next before its handler runs, so waits overlap)."""
        if self._jobs and self._idle and not self._waking:
            waiter = self._idle.pop()
            if not waiter.done():  # else its runner was cancelled (a stop)
                self._waking = True
                waiter.set_result(None)

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- the keeper: touches long-running reservations -------------------

    async def _keeper(self, done: asyncio.Event) -> None:
        if self._core.settings.at_most_once:
            return
        while not done.is_set():
            await _wait(done, await self._run(self._core.keep()))


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Wait for ``event`` at most ``seconds``."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
