"""What the Worker tests share: the Delayer server's part played with its
real scripts (move.lua, and release.lua's expiry), a worker run on a thread,
and polling with a deadline."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple

import redis

from delayer import Delayer, Delivery, Worker, WorkerHooks
from delayer.keys import Keys

from conftest import LUA_DIR

#: Generous: the machine running the tests may be slow and busy.
WITHIN = 60.0


def wait_for(what: str, check: Callable[[], bool], within: float = WITHIN) -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        time.sleep(0.01)


class Server:
    """The Delayer server's moves and expiry, with its own scripts, every 10 ms
    on a thread: jobs become ready when due, and a reservation past its
    deadline ends as a failed attempt."""

    def __init__(self, url: str, prefix: str = "delayer:") -> None:
        self.raw = redis.Redis.from_url(url, socket_timeout=5)
        self.prefix = prefix
        self.move = self.raw.register_script((LUA_DIR / "move.lua").read_bytes())
        self.expire = self.raw.register_script((LUA_DIR / "release.lua").read_bytes())
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        p = self.prefix
        while not self.done.is_set():
            try:
                k = Keys(p)
                self.move(
                    keys=[k.job_pool, k.malformed, k.scheduled_count, k.topics, k.reserved],
                    args=[k.bucket_prefix, k.ready_queue_prefix, 1000],
                )
                self.expire(
                    keys=[k.reserved, k.job_pool, k.malformed, k.scheduled_count, k.outcomes],
                    args=[k.bucket_prefix, k.dead_prefix, "backoff", "expired", 1000],
                )
            except redis.RedisError:
                pass  # Redis is restarting: as the server, try again
            self.done.wait(0.01)

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.raw.close()


class Recorder(WorkerHooks):
    """Hooks that remember what they heard."""

    def __init__(self) -> None:
        self.events: List[Tuple[Any, ...]] = []
        self.lock = threading.Lock()

    def _add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def names(self, kind: str) -> List[Tuple[Any, ...]]:
        with self.lock:
            return [e for e in self.events if e[0] == kind]

    def job_started(self, job: Delivery) -> None:
        self._add("started", job.id)

    def job_succeeded(self, job: Delivery, seconds: float) -> None:
        self._add("succeeded", job.id)

    def job_acked(self, job: Delivery) -> None:
        self._add("acked", job.id)

    def job_failed(self, job: Delivery, error: BaseException, seconds: float) -> None:
        self._add("failed", job.id, type(error).__name__)

    def job_lost(self, job: Delivery, what: str) -> None:
        self._add("lost", job.id, what)

    def connection_lost(self, error: Exception, pause: float) -> None:
        self._add("connection_lost", str(error), pause)

    def stopping(self, in_flight: int) -> None:
        self._add("stopping", in_flight)

    def stopped(self, abandoned: int) -> None:
        self._add("stopped", abandoned)


class Running:
    """A Worker running on a thread (``run(signals=False)``)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run(signals=False)
        except BaseException as e:  # the test reports it
            self.error = e

    def stop(self, within: float = WITHIN) -> None:
        self.worker.stop()
        self.thread.join(timeout=within)
        assert not self.thread.is_alive(), "the worker did not stop"
        assert self.error is None, f"the worker raised {self.error!r}"


def push_now(d: Delayer, ids: Iterator[str], topic: str = "t", **kwargs: Any) -> None:
    for i in ids:
        d.push(topic, i, 0, f"body-{i}", **kwargs)
