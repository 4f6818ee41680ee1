"""A Worker warns when Redis may evict job data (issue 20, item 3).

Against real redis-servers started with ``--maxmemory-policy allkeys-lru``:
the warning names the policy and the fix, once per connection (at start, and
again after Redis came back), never per job; read with CONFIG GET, or with
INFO where the ACL user may not run CONFIG. Under ``noeviction`` nothing is
said.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterator, List

import pytest

from delayer import Delayer, Worker
from delayer.aio import Delayer as AsyncDelayer, Worker as AsyncWorker

from conftest import RedisServer, run
from workerkit import WITHIN, Recorder, Running, Server, push_now, wait_for

WARNING = (
    "redis maxmemory-policy is allkeys-lru: Redis may evict job data and lose jobs; set maxmemory-policy "
    "noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
)
LRU = ["--maxmemory-policy", "allkeys-lru"]
USER, PASSWORD = "worker", "worker-pw-Secret-7"


@pytest.fixture(scope="module")
def lru_server() -> Iterator[RedisServer]:
    """allkeys-lru, and a user that may not run CONFIG (INFO it may)."""
    server = RedisServer(args=[*LRU, "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "-config"])
    try:
        yield server
    finally:
        server.stop()


def warnings(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if "maxmemory-policy" in r.getMessage()]


def run_jobs(url: str, n: int = 20) -> None:
    """A Worker (two fetch loops) runs ``n`` jobs, then stops."""
    server = Server(url)
    try:
        with Delayer(url) as d:
            hooks = Recorder()
            w = Worker(d, concurrency=10, hooks=hooks)
            w.handle("t", lambda job: None)
            push_now(d, (f"j{i}" for i in range(n)))
            running = Running(w)
            try:
                wait_for("every ack", lambda: len(hooks.names("acked")) == n)
            finally:
                running.stop()
    finally:
        server.close()


def test_an_evicting_policy_is_named_once_with_its_fix(lru_server: RedisServer,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "delayer")
    run_jobs(lru_server.url)
    assert warnings(caplog) == [WARNING]
    [record] = [r for r in caplog.records if r.getMessage() == WARNING]
    assert (record.name, record.levelno) == ("delayer.worker", logging.WARNING)


def test_a_user_without_config_is_told_by_info(lru_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "delayer")
    run_jobs(f"redis://{USER}:{PASSWORD}@127.0.0.1:{lru_server.port}/0")
    assert warnings(caplog) == [WARNING]


def test_noeviction_says_nothing(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "delayer")
    run_jobs(url)
    assert warnings(caplog) == []


def test_a_policy_nobody_may_read_is_said_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "delayer")
    server = RedisServer(args=[*LRU, "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "-config",
                               "-info"])
    try:
        run_jobs(f"redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}/0")
        assert warnings(caplog) == [
            "cannot read redis maxmemory-policy (CONFIG GET and INFO memory were refused); unless it is "
            "noeviction, Redis may evict job data and lose jobs"
        ]
    finally:
        server.stop()


def test_the_warning_comes_again_after_redis_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "delayer")
    server = RedisServer(args=LRU)
    mover = Server(server.url)
    try:
        with Delayer(server.url) as d:
            hooks = Recorder()
            w = Worker(d, concurrency=2, hooks=hooks)
            w.handle("t", lambda job: None)
            running = Running(w)
            try:
                wait_for("the first warning", lambda: len(warnings(caplog)) == 1)
                server.halt()
                wait_for("a lost connection", lambda: bool(hooks.names("connection_lost")))
                server.start_again()
                wait_for("the warning after the reconnect", lambda: len(warnings(caplog)) == 2)
                push_now(d, (f"j{i}" for i in range(5)))
                wait_for("every ack", lambda: len(hooks.names("acked")) == 5)
            finally:
                running.stop()
        assert warnings(caplog) == [WARNING, WARNING]
    finally:
        mover.close()
        server.stop()


def test_the_asyncio_worker_warns_once(lru_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "delayer")

    async def body() -> None:
        async with AsyncDelayer(lru_server.url) as d:
            for i in range(20):
                await d.push("t", f"a{i}", 0)
            hooks = Recorder()
            w = AsyncWorker(d, concurrency=10, hooks=hooks)

            async def handle(job: object) -> None:
                pass

            w.handle("t", handle)
            task = asyncio.create_task(w.run(signals=False))
            deadline = time.monotonic() + WITHIN
            while len(hooks.names("acked")) < 20:
                assert time.monotonic() < deadline, "the jobs were not all acked"
                await asyncio.sleep(0.01)
            w.stop()
            await task

    mover = Server(lru_server.url)
    try:
        run(body)
    finally:
        mover.close()
    assert warnings(caplog) == [WARNING]
