"""A Redis restart (issue 10, item 4): calls in flight and calls while Redis is
down raise the SDK's :class:`ConnectionFailed`; once Redis answers again, the
next call of every kind works, sync and asyncio.

The real redis-server is halted (SIGTERM) and started again on the same port,
while workers are blocked in bpop / breserve, and while the clients are idle.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest
import redis

from delayer import ConnectionFailed, Delayer, Job
from delayer import aio

from conftest import RedisServer, move_until


def wait_for_blocked(server: RedisServer, count: int, within: float = 30.0) -> None:
    """Poll until ``count`` clients block in BRPOP / BLMOVE, with a deadline."""
    probe = server.client()
    try:
        deadline = time.monotonic() + within
        while int(probe.info("clients")["blocked_clients"]) < count:
            assert time.monotonic() < deadline, f"{count} clients did not block within {within} s"
            time.sleep(0.01)
    finally:
        probe.close()


def make_ready(server: RedisServer, count: int) -> None:
    """Let the server's move.lua put ``count`` pushed jobs in their ready queues."""
    raw = server.client()
    try:
        move_until(raw, count)
    finally:
        raw.close()


#: The first call after Redis is back, of each kind: on the client's pool
#: (a script, a pipeline) and on the waits' connections (bpop, breserve).
FIRST_CALLS = ["pop", "push_many", "bpop", "breserve"]


def first_call(d: Delayer, kind: str) -> None:
    if kind == "pop":
        assert d.pop("t") is None
    elif kind == "push_many":
        assert len(d.push_many([Job("x", f"x{n}", 100) for n in range(2)])) == 2
    elif kind == "bpop":
        assert d.bpop("t", 0.2) is None
    else:
        assert d.breserve("r", 30, 0.2) is None


def check_every_kind_of_call_works(d: Delayer, server: RedisServer) -> None:
    assert d.pop("t") is None
    assert d.reserve("r", 30) is None
    d.push("t", "after", 0, b"a")
    assert len(d.push_many([Job("r", f"r{n}", 0) for n in range(2)])) == 2
    make_ready(server, 3)
    got = d.bpop("t", 10)
    assert got is not None and got.id == "after"
    job = d.breserve("r", 30, 10)
    assert job is not None and job.id in ("r0", "r1")
    assert d.ack(job) is True


@pytest.mark.parametrize("first", FIRST_CALLS)
@pytest.mark.parametrize("while_blocked", [True, False], ids=["blocked", "idle"])
def test_sync_client_works_again_once_redis_is_back(
    own_server: RedisServer, while_blocked: bool, first: str
) -> None:
    with Delayer(own_server.url) as d:
        d.push("t", "before", 100)  # both pools hold a connection now
        assert d.bpop("t", 0.01) is None
        if while_blocked:
            with ThreadPoolExecutor(2) as pool:
                calls = [pool.submit(d.bpop, "t", 0), pool.submit(d.breserve, "r", 30, 0)]
                wait_for_blocked(own_server, 2)
                own_server.halt()
                for call in calls:
                    with pytest.raises(ConnectionFailed, match="cannot reach Redis"):
                        call.result(timeout=60)
            # while Redis is down: the SDK's connection error, at once
            for down in (lambda: d.pop("t"), lambda: d.bpop("t", 1), lambda: d.push("t", "x", 1)):
                with pytest.raises(ConnectionFailed):
                    down()
        else:
            own_server.halt()  # no call notices: none is made while it is down
        own_server.start_again()
        first_call(d, first)
        check_every_kind_of_call_works(d, own_server)


async def in_thread(fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn`` off the event loop, which goes on running meanwhile (as in
    an application: it sees Redis close its connections)."""
    await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def async_first_call(d: aio.Delayer, kind: str) -> None:
    if kind == "pop":
        assert await d.pop("t") is None
    elif kind == "push_many":
        assert len(await d.push_many([Job("x", f"x{n}", 100) for n in range(2)])) == 2
    elif kind == "bpop":
        assert await d.bpop("t", 0.2) is None
    else:
        assert await d.breserve("r", 30, 0.2) is None


async def async_check_every_kind_of_call_works(d: aio.Delayer, server: RedisServer) -> None:
    assert await d.pop("t") is None
    assert await d.reserve("r", 30) is None
    await d.push("t", "after", 0, b"a")
    assert len(await d.push_many([Job("r", f"r{n}", 0) for n in range(2)])) == 2
    make_ready(server, 3)
    got = await d.bpop("t", 10)
    assert got is not None and got.id == "after"
    job = await d.breserve("r", 30, 10)
    assert job is not None and job.id in ("r0", "r1")
    assert await d.ack(job) is True


@pytest.mark.parametrize("first", FIRST_CALLS)
@pytest.mark.parametrize("while_blocked", [True, False], ids=["blocked", "idle"])
def test_async_client_works_again_once_redis_is_back(
    own_server: RedisServer, while_blocked: bool, first: str
) -> None:
    async def main() -> None:
        async with aio.Delayer(own_server.url) as d:
            await d.push("t", "before", 100)
            assert await d.bpop("t", 0.01) is None
            if while_blocked:
                calls = [asyncio.ensure_future(d.bpop("t", 0)), asyncio.ensure_future(d.breserve("r", 30, 0))]
                await in_thread(wait_for_blocked, own_server, 2)
                await in_thread(own_server.halt)
                for call in calls:
                    with pytest.raises(ConnectionFailed, match="cannot reach Redis"):
                        await asyncio.wait_for(call, 60)
                with pytest.raises(ConnectionFailed):
                    await d.pop("t")
                with pytest.raises(ConnectionFailed):
                    await d.bpop("t", 1)
            else:
                await in_thread(own_server.halt)
            await in_thread(own_server.start_again)
            await async_first_call(d, first)
            await async_check_every_kind_of_call_works(d, own_server)

    asyncio.run(main())


def test_a_passed_in_client_works_again_too(own_server: RedisServer) -> None:
    client = redis.Redis.from_url(own_server.url, socket_timeout=2)
    with Delayer(own_server.url, client=client) as d:
        assert d.bpop("t", 0.01) is None
        own_server.halt()
        own_server.start_again()
        check_every_kind_of_call_works(d, own_server)
    client.close()
