"""What the flow-control tests share (design 23, slice 1: consumers obey a
topic's flow hash; nothing public pauses yet): the names the protocol fixes,
spelled out (not taken from the SDK), a pause and a resume written by hand as
flow.lua will write them, and jobs made ready with the server's own scripts."""

from __future__ import annotations

import time
from typing import Callable, Dict, List

import redis

import conftest
import topickit

P = "delayer:"
LAYOUTS = ("classic", "topic")


def names(layout: str, topic: str = "t") -> Dict[str, str]:
    """The topic's ready queue, pool, flow hash and gate in ``layout``."""
    if layout == "topic":
        return {kind: topickit.key(P, topic, kind) for kind in ("ready", "pool", "flow", "gate")}
    return {"ready": f"{P}ready_queue:{topic}", "pool": f"{P}job_pool", "flow": f"{P}flow:{topic}",
            "gate": f"{P}flow_gate:{topic}"}


def pause(raw: "redis.Redis", layout: str, topic: str = "t") -> None:
    """What a pause writes (flow.lua, slice 3): ``paused`` in the flow hash, the gate deleted."""
    n = names(layout, topic)
    with raw.pipeline(transaction=True) as pipe:
        pipe.hset(n["flow"], "paused", "1.000")
        pipe.delete(n["gate"])
        pipe.execute()


def resume(raw: "redis.Redis", layout: str, topic: str = "t") -> None:
    """What a resume writes, in one MULTI: ``paused`` gone, the gate written (which wakes every waiter)."""
    n = names(layout, topic)
    with raw.pipeline(transaction=True) as pipe:
        pipe.hdel(n["flow"], "paused")
        pipe.delete(n["gate"])
        pipe.rpush(n["gate"], "1")
        pipe.pexpire(n["gate"], 60000)
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
