"""pause, resume, is_paused and flow on the asyncio client, in both layouts:
test_pause.py's main cases, awaited (the operations are the same generators,
so these show the asyncio client drives them to the same answers and writes)."""

from __future__ import annotations

import re

import pytest
import redis

import delayer.aio as aio
from delayer import FlowState, ProtocolError

from conftest import redis_now, run
from flowkit import LAYOUTS, P, make_ready, names
from topickit import WakeListener


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pause_resume_is_paused_and_flow(url: str, raw: "redis.Redis", layout: str) -> None:
    n = names(layout)

    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            assert await d.is_paused("t") is False
            before = redis_now(raw)
            assert await d.pause("t") is True
            assert await d.pause("t") is False
            assert await d.is_paused("t") is True
            state = await d.flow("t")
            assert isinstance(state, FlowState) and state.paused and not state.changed
            assert state.paused_since is not None and before - 0.002 <= state.paused_since <= redis_now(raw)
            assert raw.hget(n["flow"], "paused") == f"{state.paused_since:.3f}".encode()
            assert raw.sismember(f"{P}flow_topics", "t") == (layout == "classic")
            assert await d.resume("t") is True
            assert await d.is_paused("t") is False
            assert (await d.flow("t")).paused_since is None
            assert raw.lrange(n["gate"], 0, -1) == [b"1"]

    run(main)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_paused_topic_hands_out_nothing_until_resumed(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            await d.push("t", "a", 0)
            make_ready(raw, layout, 1)
            await d.pause("t")
            assert await d.pop("t") is None and await d.reserve("t", 30) is None
            assert await d.bpop("t", 0.2) is None
            await d.resume("t")
            got = await d.pop("t")
            assert got is not None and got.id == "a"

    run(main)


def test_held_in_each_layout(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout="topic") as d:
            await d.push("t", "a", 0)
            await d.push("t", "b", 0)
            await d.push("t", "later", 3600)
            await d.pause("t")
            assert (await d.flow("t")).held == 2  # the pool's due jobs
            await d.resume("t")
            assert (await d.flow("t")).held == 0
        async with aio.Delayer(url, P) as d:
            await d.pause("c")
            raw.zadd(f"{P}flow_pool:c", {"x": 1.0, "y": 2.0})  # set aside, as the server's move.lua would
            assert (await d.flow("c")).held == 2

    run(main)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resume_announces_once_and_a_second_resume_writes_nothing(
    url: str, raw: "redis.Redis", layout: str
) -> None:
    listener = WakeListener(raw, P)

    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            assert await d.resume("t") is False and raw.dbsize() == 0
            await d.pause("t")
            await d.resume("t")
            first = listener.next()
            flow = raw.hgetall(names(layout)["flow"])
            assert await d.resume("t") is False
            assert raw.hgetall(names(layout)["flow"]) == flow
            # The next real resume is of another topic: two resumes in one
            # millisecond would read alike.
            await d.pause("u")
            await d.resume("u")
            second = listener.next()
            assert first is not None and re.fullmatch(rb"\d+\.\d{3} t", first)
            assert first.split(b" ")[0] == flow[b"resumed"]
            # the next message is the next real resume's: the second resume published nothing
            assert second is not None and second.endswith(b" u")

    try:
        run(main)
    finally:
        listener.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_flow_hash_of_the_wrong_type_is_named(url: str, raw: "redis.Redis", layout: str) -> None:
    flow = names(layout)["flow"]
    raw.set(flow, "x")

    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            for call in (d.pause, d.resume, d.is_paused, d.flow):
                with pytest.raises(ProtocolError, match=re.escape(flow)):
                    await call("t")

    run(main)
    assert raw.dbsize() == 1
