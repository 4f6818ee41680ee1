"""set_rate_limit and clear_rate_limit on the asyncio client, in both layouts:
test_rate_limit.py's main cases, awaited (the operations are the same
generators, so these show the asyncio client drives them to the same answers,
writes and refusals)."""

from __future__ import annotations

import math

import pytest
import redis

import delayer.aio as aio
from delayer import FlowState, InvalidArgument, RateLimit

from conftest import run
from flowkit import LAYOUTS, P, RATE_0, REFUSED, make_ready, names


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_read_and_clear_a_limit(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            assert (await d.flow("t")).rate_limit is None
            state = await d.set_rate_limit("t", 0.5, 3)
            assert isinstance(state, FlowState) and state.changed and state.rate_limit == RateLimit(0.5, 3)
            assert (await d.set_rate_limit("t", 0.5, 3)).changed is False
            assert (await d.set_rate_limit("t", 50)).rate_limit == RateLimit(50.0, 50)
            assert (await d.flow("t")).rate_limit == RateLimit(50.0, 50)
            flow = raw.hgetall(names(layout)["flow"])
            assert (flow[b"per_second"], flow[b"burst"]) == (b"50", b"50")
            assert raw.sismember(f"{P}flow_topics", "t") == (layout == "classic")
            assert await d.clear_rate_limit("t") is True
            assert await d.clear_rate_limit("t") is False
            assert (await d.flow("t")).rate_limit is None

    run(main)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_refusals_are_the_scripts_words(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            for per_second, burst, message in REFUSED:
                with pytest.raises(InvalidArgument) as e:
                    await d.set_rate_limit("t", per_second, burst)
                assert str(e.value) == message
            with pytest.raises(InvalidArgument, match="burst must be an int or None, not float"):
                await d.set_rate_limit("t", 10, 1.5)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument, match="per_second must be an int or float, not bool"):
                await d.set_rate_limit("t", True)
            with pytest.raises(InvalidArgument) as e:
                await d.set_rate_limit("t", -0.0)
            assert str(e.value) == RATE_0
            with pytest.raises(InvalidArgument, match="finite"):
                await d.set_rate_limit("t", math.nan, 5)

    run(main)
    assert raw.dbsize() == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stats_and_lookup_show_the_limit(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout=layout) as d:
            await d.push("t", "due", 0)
            await d.push("t", "later", 3600)
            raw.sadd(P + "topics", "t")
            await d.set_rate_limit("t", 4, 2)
            if layout == "classic":
                raw.zadd(f"{P}flow_pool:t", {"due": 1.0})  # set aside, as the server's move.lua would
            assert (await d.flow("t")).held == 1
            t = (await d.stats()).topics[0]
            assert (t.topic, t.rate_limit, t.held, t.paused) == ("t", RateLimit(4.0, 2), 1, False)
            assert (await d.job("t", "later")).flow == "limited"
            await d.clear_rate_limit("t")
            assert (await d.stats()).topics[0].rate_limit is None
            assert (await d.job("t", "later")).flow == ""

    run(main)


def test_lookup_of_a_ready_job_of_a_limited_topic(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout="topic") as d:
            await d.push("t", "r", 0)
            make_ready(raw, "topic", 1)
            await d.set_rate_limit("t", 1)
            info = await d.job("t", "r")
            assert (info.state, info.flow) == ("ready", "limited")

    run(main)
