"""Blocking calls wait their whole timeout, whatever the client's socket timeout
(issue 10, item 1): redis-py 8 gives every client a 5 s socket timeout, which
killed each bpop / breserve of an idle worker after 5 s.

Sync and asyncio, the SDK's own clients and passed-in ones with a short
socket timeout, all waiting at once (so the test takes one wait, not eight).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, Optional, Tuple

import redis
import redis.asyncio as aioredis

from delayer import Delayer, Message, ReservedMessage
from delayer import aio

from conftest import aclose

IDLE = 7.0  # longer than redis-py 8's default socket timeout (5 s)
SHORT_SOCKET_TIMEOUT = 1.0  # of the passed-in clients

Result = Tuple[Optional[object], float]  # what the call returned, and how long it took


#: One waiter per topic: "p-" bpop, "r-" breserve; sync or asyncio; the
#: SDK's own client or a passed-in one with a short socket timeout.
TOPICS = ["p-sync", "r-sync", "p-sync-passed", "r-sync-passed", "p-aio", "r-aio", "p-aio-passed", "r-aio-passed"]


def sync_timed(url: str, which: str, topic: str, timeout: float) -> Result:
    """One sync client (own, or on a passed-in client) waiting on ``topic``."""
    client = redis.Redis.from_url(url, socket_timeout=SHORT_SOCKET_TIMEOUT) if which == "passed" else None
    with Delayer(url, client=client) if client is not None else Delayer(url) as d:
        start = time.monotonic()
        if topic.startswith("r-"):
            got: object = d.breserve(topic, 30, timeout)
        else:
            got = d.bpop(topic, timeout)
        elapsed = time.monotonic() - start
    if client is not None:
        client.close()
    return got, elapsed


def async_timed(url: str, which: str, topic: str, timeout: float) -> Result:
    """One asyncio client (own, or on a passed-in client) waiting on ``topic``."""

    async def main() -> Result:
        client = aioredis.Redis.from_url(url, socket_timeout=SHORT_SOCKET_TIMEOUT) if which == "passed" else None
        async with aio.Delayer(url, client=client) if client is not None else aio.Delayer(url) as d:
            start = time.monotonic()
            if topic.startswith("r-"):
                got: object = await d.breserve(topic, 30, timeout)
            else:
                got = await d.bpop(topic, timeout)
            elapsed = time.monotonic() - start
        if client is not None:
            await aclose(client)
        return got, elapsed

    return asyncio.run(main())


def waiters(url: str, timeout: float) -> Dict[str, Callable[[], Result]]:
    """Every kind of blocking call, each on its own topic ("r-" topics: breserve)."""
    calls: Dict[str, Callable[[], Result]] = {}
    for topic in TOPICS:
        _, flavour, *rest = topic.split("-")
        which = "passed" if rest else "own"
        timed = sync_timed if flavour == "sync" else async_timed
        calls[topic] = lambda timed=timed, which=which, topic=topic: timed(url, which, topic, timeout)
    return calls




def run_all(calls: Dict[str, Callable[[], Result]], meanwhile: Callable[[], None] = lambda: None) -> Dict[str, Result]:
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures: Dict[str, "Future[Result]"] = {name: pool.submit(call) for name, call in calls.items()}
        meanwhile()
        return {name: f.result(timeout=120) for name, f in futures.items()}


def test_a_wait_outlasts_the_socket_timeout_and_ends_with_none(url: str, raw: "redis.Redis") -> None:
    results = run_all(waiters(url, IDLE))
    for name, (got, elapsed) in results.items():
        assert got is None, name
        assert elapsed >= IDLE - 0.05, (name, elapsed)
        assert elapsed < IDLE + 20, (name, elapsed)


def test_a_wait_forever_gets_a_job_that_comes_after_the_socket_timeout(url: str, raw: "redis.Redis") -> None:
    after = 5.5  # past redis-py 8's default socket timeout of 5 s

    def push_later() -> None:
        # the waiters block first; then, after the socket timeouts, jobs come
        deadline = time.monotonic() + 30
        while int(raw.info("clients")["blocked_clients"]) < len(TOPICS):
            assert time.monotonic() < deadline, "not every waiter blocked"
            time.sleep(0.01)
        time.sleep(after)
        for topic in TOPICS:
            raw.hset(f"delayer:job_bucket:{topic}-job", mapping={"topic": topic, "body": "late"})
            raw.lpush(f"delayer:ready_queue:{topic}", f"{topic}-job")

    results = run_all(waiters(url, 0), push_later)
    for name, (got, elapsed) in results.items():
        assert isinstance(got, (Message, ReservedMessage)), (name, got)
        assert (got.id, got.body) == (f"{got.topic}-job", b"late"), name
        assert elapsed >= after, (name, elapsed)
    assert raw.llen("delayer:ready_queue:p-sync") == 0
