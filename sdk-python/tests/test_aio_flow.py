"""The asyncio client and Worker obey a topic's flow hash (design 23 §3,
slice 1), in both layouts: test_flow.py's waits and Worker on tasks. The
pause and resume are the asyncio client's ``pause`` and ``resume``, but
for one test that writes the hash by hand (flowkit)."""

from __future__ import annotations

import asyncio
import time
from typing import List

import pytest
import redis

import delayer.aio as aio
from delayer import Message, ReservedMessage

from conftest import run
from flowkit import LAYOUTS, P, blocked_in, calls, make_ready, pause, ready
from workerkit import Recorder

RECHECK = 5.0


async def until(what: str, check: "object", within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bpop_and_breserve_wait_across_a_pause(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d, aio.Delayer(url, P, layout=layout) as other:
            assert await d.pop("t") is None
            await d.push("t", "a", 0, "A")
            await d.push("t", "b", 0, "B")
            # Ready before the pause: the per-topic server's move_topic.lua moves nothing of a paused topic.
            make_ready(raw, layout, 2)
            assert await d.pause("t") is True
            forever = asyncio.ensure_future(d.bpop("t", 0))
            bounded = asyncio.ensure_future(other.breserve("t", 30, 20))
            await until("both waits on the gate", lambda: blocked_in(raw, "brpoplpush") == 2)
            await asyncio.sleep(1.0)  # the point: a second with due jobs ready, and nothing handed out
            assert not forever.done() and not bounded.done()
            assert await d.pop("t") is None and await d.reserve("t", 30) is None
            assert await d.reserve_many("t", 30, 5) == ([], [])
            assert sorted(ready(raw, layout)) == [b"a", b"b"]
            start = time.monotonic()
            assert await d.resume("t") is True  # on the client whose bpop waits
            got = await asyncio.wait_for(asyncio.gather(forever, bounded), RECHECK)
            took = time.monotonic() - start
            assert took < 1.5, f"the resume was seen after {took:.2f} s"
            assert isinstance(got[0], Message) and isinstance(got[1], ReservedMessage)
            assert sorted(j.id for j in got) == ["a", "b"]

    run(main)
    assert ready(raw, layout) == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_paused_wait_sends_no_brpop(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            await d.push("t", "a", 0)
            make_ready(raw, layout, 1)
            pause(raw, layout)  # by hand, as an operator could: the scripts read the field, whoever wrote it
            raw.config_resetstat()
            assert await d.bpop("t", 1.5) is None
            assert await d.breserve("t", 30, 1.5) is None

    run(main)
    made = calls(raw)
    assert "brpop" not in made and "blmove" not in made, made
    assert made.get("evalsha", 0) <= 4 and made.get("brpoplpush", 0) <= 4, made
    assert ready(raw, layout) == [b"a"]


@pytest.mark.parametrize("at_most_once", [False, True], ids=["reserve", "pop"])
def test_a_worker_on_a_paused_topic_starts_nothing_until_resumed(
    url: str, raw: "redis.Redis", at_most_once: bool
) -> None:
    seen: List[str] = []
    hooks = Recorder()

    async def main() -> None:
        async with aio.Delayer(url, P) as d:
            for i in range(5):
                await d.push("t", f"j{i}", 0)
            make_ready(raw, "classic", 5)
            assert await d.pause("t") is True
            w = aio.Worker(d, concurrency=3, at_most_once=at_most_once, hooks=hooks)

            @w.handler("t")
            async def handle(job: aio.Delivery) -> None:
                seen.append(job.id)

            task = asyncio.ensure_future(w.run(signals=False))
            try:
                await until("the worker on the gate", lambda: blocked_in(raw, "brpoplpush") == 1)
                raw.config_resetstat()
                await asyncio.sleep(2.0)  # the point: two seconds paused, nothing started, few calls
                made = calls(raw)
                assert seen == [] and hooks.names("started") == []
                assert "blmove" not in made and "brpop" not in made, made
                assert made.get("evalsha", 0) <= 4 and made.get("brpoplpush", 0) <= 4, made
                assert await d.resume("t") is True
                await until("every job run", lambda: len(seen) == 5, within=RECHECK)
                if not at_most_once:
                    await until("every ack", lambda: len(hooks.names("acked")) == 5)
            finally:
                w.stop()
                await asyncio.wait_for(task, 30)

    run(main)
    assert sorted(seen) == [f"j{i}" for i in range(5)]
    assert ready(raw, "classic") == []
