"""What the flow-control tests share (design 23: consumers obey a topic's
flow hash; the clients' pause and resume write it with flow.lua): the names
the protocol fixes, spelled out (not taken from the SDK), a pause written by
hand (the tests that show a hand-written pause is obeyed too), jobs made
ready with the server's own scripts, and the rate limits flow.lua refuses."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import redis

import conftest
import topickit
from delayer import Delayer

P = "delayer:"
LAYOUTS = ("classic", "topic")

#: flow.lua's refusals, in its words (what every SDK, the CLI and HTTP say alike).
RATE_0 = "a rate of 0 would stop the topic: pause it instead (pause(topic) / delayer pause <topic>)"
REFUSED: List[Tuple[Any, Any, str]] = [
    (0, None, RATE_0),
    (0.0, None, RATE_0),
    (-1, None, 'the rate must be more than 0 jobs per second, got -1'),
    (math.nan, None, 'the rate must be a finite number of jobs per second'),
    (math.inf, None, 'the rate must be a finite number of jobs per second'),
    (-math.inf, None, 'the rate must be a finite number of jobs per second'),
    (2e6, None, 'the rate must be at most 1000000 jobs per second, got 2000000'),
    (1e-6, None, 'the rate must be at least one job a day (1/86400 per second), got 1e-06'),
    (10, 0, 'the burst must be a whole number of jobs from 1 to 1000000, got "0"'),
    (10, -3, 'the burst must be a whole number of jobs from 1 to 1000000, got "-3"'),
    (10, 2_000_000, 'the burst must be a whole number of jobs from 1 to 1000000, got "2000000"'),
    (1000, 5, "the burst must be at least 1% of the rate per second (5 at 1000/s would cap the rate below it)"),
]


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    """Each test in both key layouts (import this fixture to use it)."""
    return str(request.param)


@pytest.fixture
def d(url: str, layout: str) -> Iterator[Delayer]:
    """A client of ``layout`` under the prefix ``P``."""
    with Delayer(url, P, layout=layout) as client:
        yield client


def names(layout: str, topic: str = "t") -> Dict[str, str]:
    """The topic's ready queue, pool, flow hash and gate in ``layout``."""
    if layout == "topic":
        return {kind: topickit.key(P, topic, kind) for kind in ("ready", "pool", "flow", "gate")}
    return {"ready": f"{P}ready_queue:{topic}", "pool": f"{P}job_pool", "flow": f"{P}flow:{topic}",
            "gate": f"{P}flow_gate:{topic}"}


def pause(raw: "redis.Redis", layout: str, topic: str = "t") -> None:
    """A pause by hand, as PROTOCOL.md tells an operator: ``paused`` in the
    flow hash (any value), the gate deleted (flow.lua also lists a classic
    topic in ``flow_topics``, for the server: none runs in these tests)."""
    n = names(layout, topic)
    with raw.pipeline(transaction=True) as pipe:
        pipe.hset(n["flow"], "paused", "1.000")
        pipe.delete(n["gate"])
        pipe.execute()


def make_ready(raw: "redis.Redis", layout: str, count: int, topic: str = "t") -> None:
    """Move ``count`` due jobs of ``topic`` to its ready queue with the server's script."""
    if layout == "topic":
        topickit.move_until(raw, topic, count, P)
    else:
        conftest.move_until(raw, count, P)


def ready(raw: "redis.Redis", layout: str, topic: str = "t") -> List[bytes]:
    """The topic's ready queue, left to right (the right end is handed out first)."""
    return raw.lrange(names(layout, topic)["ready"], 0, -1)


def calls(raw: "redis.Redis") -> Dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT (``evalsha``, ``brpoplpush``, ...)."""
    stats = raw.info("commandstats")
    return {k[len("cmdstat_"):]: int(v["calls"]) for k, v in stats.items()}


def blocked_in(raw: "redis.Redis", command: str) -> int:
    """How many clients are blocked in ``command`` now."""
    return sum(1 for c in raw.client_list() if c.get("cmd") == command and "b" in c.get("flags", ""))


def wait_for(what: str, check: Callable[[], bool], within: float = topickit.WITHIN) -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        time.sleep(0.01)
