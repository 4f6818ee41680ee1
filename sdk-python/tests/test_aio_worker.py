"""The asyncio Worker (issue 14): the thread Worker's behaviours on tasks,
against a real redis-server with the server's scripts (workerkit.Server)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Iterator, List

import pytest
import redis

import delayer.aio as aio
from delayer import Backoff, Delayer

from conftest import RedisServer, bucket, redis_now, run
from workerkit import WITHIN, Recorder, Server, push_now


@pytest.fixture
def server(url: str) -> Iterator[Server]:
    s = Server(url)
    try:
        yield s
    finally:
        s.close()


async def until(what: str, check: Callable[[], bool], within: float = WITHIN) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        await asyncio.sleep(0.01)


def with_worker(url: str, body: Callable[[aio.Delayer], Awaitable[None]]) -> None:
    async def main() -> None:
        async with aio.Delayer(url) as d:
            await body(d)

    run(main)


def test_jobs_are_run_and_acked(url: str, raw: "redis.Redis", server: Server) -> None:
    with Delayer(url) as d:
        push_now(d, (f"j{i}" for i in range(30)))
    seen: List[Any] = []
    hooks = Recorder()

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, concurrency=5, hooks=hooks)

        @w.handler("t")
        async def handle(job: aio.Delivery) -> None:
            await asyncio.sleep(0)
            seen.append((job.id, job.text, job.attempts))

        task = asyncio.ensure_future(w.run(signals=False))
        await until("every ack", lambda: len(hooks.names("acked")) == 30)
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    with_worker(url, body)
    assert sorted(seen) == sorted((f"j{i}", f"body-j{i}", 1) for i in range(30))
    assert not raw.keys("delayer:job_bucket:*") and raw.zcard("delayer:reserved") == 0


def test_handlers_that_wait_run_at_once_up_to_the_concurrency(url: str, server: Server) -> None:
    # A runner takes jobs until none is left, and wakes the next before a
    # handler runs: handlers that wait must still overlap, all 5 at once.
    with Delayer(url) as d:
        push_now(d, (f"j{i}" for i in range(10)))
    running: List[str] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, concurrency=5)
        everyone = asyncio.Event()

        @w.handler("t")
        async def handle(job: aio.Delivery) -> None:
            running.append(job.id)
            if len(running) == 5:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), WITHIN)  # fails unless 5 run at once

        task = asyncio.ensure_future(w.run(signals=False))
        await until("ten handlers", lambda: len(running) == 10)
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    with_worker(url, body)
    assert sorted(running) == sorted(f"j{i}" for i in range(10))


def test_a_failure_is_released_with_its_error_and_dies_on_its_last_attempt(
    url: str, raw: "redis.Redis", server: Server
) -> None:
    with Delayer(url) as d:
        d.push("t", "a", 0, "x", max_attempts=2, backoff=Backoff.fixed(0))
    runs: List[int] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d)

        async def fail(job: aio.Delivery) -> None:
            runs.append(job.attempts)
            raise ValueError(f"bad {job.id}")

        w.handle("t", fail)
        task = asyncio.ensure_future(w.run(signals=False))
        await until("the dead letter", lambda: raw.llen("delayer:dead:t") == 1)
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    with_worker(url, body)
    assert runs == [1, 2]
    assert raw.hget(bucket("a"), "last_error") == b"ValueError: bad a"


def test_at_most_once_pops(url: str, raw: "redis.Redis", server: Server) -> None:
    with Delayer(url) as d:
        push_now(d, (f"j{i}" for i in range(10)))
    seen: List[str] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, at_most_once=True, concurrency=3)

        async def handle(job: aio.Delivery) -> None:
            seen.append(job.id)

        w.handle("t", handle)
        task = asyncio.ensure_future(w.run(signals=False))
        await until("every job", lambda: len(seen) == 10)
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    with_worker(url, body)
    assert not raw.exists("delayer:reserved", "delayer:receipt_seq")


def test_touch_extend_and_a_grace_that_runs_out(url: str, raw: "redis.Redis", server: Server) -> None:
    with Delayer(url) as d:
        d.push("t", "slow", 0, "x")
        d.push("t", "stuck", 0, "x", backoff=Backoff.fixed(3600))
    hooks = Recorder()
    runs: List[str] = []
    extended: List[Any] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, ttr=4.0, grace=0.5, hooks=hooks)

        async def handle(job: aio.Delivery) -> None:
            runs.append(job.id)
            if job.id == "slow":
                await asyncio.sleep(10)  # past its ttr twice over: touched every 2 s
            else:
                extended.append(await job.extend(600))
                await asyncio.sleep(3600)  # never ends: cancelled after the grace

        w.handle("t", handle)
        task = asyncio.ensure_future(w.run(signals=False))
        await until("the slow job's ack", lambda: not raw.exists(bucket("slow")))
        score = raw.zscore("delayer:reserved", "stuck")
        assert score is not None and score / 1000 > redis_now(raw) + 500  # the extend
        server.close()  # keep the released job in view
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    with_worker(url, body)
    assert sorted(runs) == ["slow", "stuck"]  # each once: no expiry took one back
    assert isinstance(extended[0], float)
    assert hooks.names("stopped") == [("stopped", 1)]
    assert raw.hget(bucket("stuck"), "last_error").startswith(b"WorkerStopped: ")
    assert raw.zscore("delayer:job_pool", "stuck") <= redis_now(raw) + 1


def test_the_worker_outlives_a_redis_restart(own_server: RedisServer) -> None:
    server = Server(own_server.url)
    hooks = Recorder()
    seen: List[str] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, hooks=hooks)

        async def handle(job: aio.Delivery) -> None:
            seen.append(job.id)

        w.handle("t", handle)
        task = asyncio.ensure_future(w.run(signals=False))
        await d.push("t", "before", 0, "x")
        await until("the first job", lambda: seen == ["before"])
        own_server.halt()
        await until("the lost connection", lambda: hooks.names("connection_lost") != [])
        own_server.start_again()
        await d.push("t", "after", 0, "x")
        await until("the job pushed after the restart", lambda: seen == ["before", "after"])
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    try:
        with_worker(own_server.url, body)
    finally:
        server.close()
