"""A per-topic push sends its index write with the script, in one round trip
(PROTOCOL.md, "push sends its index write with the script"): what it does
once push.lua answered, first with synthetic replies (the decision is
:mod:`delayer._ops`', no I/O), then against a real redis-server whose script
cache was flushed, with the sync and the asyncio client."""

from __future__ import annotations

from typing import Any, List, Optional

import pytest
import redis
from redis.exceptions import NoScriptError

import delayer.aio as aio
from delayer import Delayer, IdTakenError, _ops
from delayer.keys import Keys

from conftest import run
from topickit import WakeListener, indexed, key

P = "shop:"
KEYS = Keys(P, "topic")


# -- the decision, with synthetic replies ----------------------------------------


def test_the_estimate_is_the_clients_clock_plus_the_delay_100_ms_early() -> None:
    assert _ops.estimate(1000.5, 2000) == "1002.400"
    assert _ops.estimate(1000.0999, 0) == "999.999"


def test_what_follows_the_pipeline() -> None:
    # the estimate later than the answered due time (the clocks disagree): write again
    assert _ops.follow_up("100.101", "100.100", False, False) == _ops.WRITE
    assert _ops.follow_up("100.101", "100.100", True, True) == _ops.WRITE
    # not later: wake when the early ZADD lowered the index, or may have (sent again after NOSCRIPT)
    assert _ops.follow_up("100.100", "100.100", True, False) == _ops.WAKE
    assert _ops.follow_up("100.000", "100.100", False, True) == _ops.WAKE
    assert _ops.follow_up("100.000", "100.100", False, False) is None


class Driven:
    """A push operation driven by hand: each step it yields, answered by the test."""

    def __init__(self, job_id: str = "1", delay: float = 60, if_absent: bool = False) -> None:
        self.op = _ops.push(KEYS, "mail", job_id, delay, b"", 3600, None, None, if_absent)
        self.step: Any = next(self.op)
        self.result: Optional[float] = None

    def answer(self, reply: Any) -> Any:
        try:
            self.step = self.op.send(reply)
        except StopIteration as done:
            self.result, self.step = done.value, None
        return self.step


def early_time(step: Any) -> float:
    assert isinstance(step, _ops.Early)
    zadd, sadd = step.commands
    assert zadd[:4] == ("ZADD", P + "due", "LT", "CH") and zadd[5] == "mail"
    assert sadd == ("SADD", P + "topics", "mail")
    return float(zadd[4])


def test_one_pipeline_then_a_wake_only_when_the_index_was_lowered() -> None:
    d = Driven()
    sent = early_time(d.step)
    due = f"{sent + 0.1:.3f}"
    assert d.answer([due.encode(), 1, 1]) == _ops.Commands([("PUBLISH", P + "wake", due)], tolerate=True)
    assert d.answer([1]) is None and d.result == float(due)
    d = Driven()
    assert d.answer([f"{early_time(d.step) + 0.1:.3f}".encode(), 0, 0]) is None  # not lowered: nothing more


def test_an_estimate_later_than_the_due_time_is_written_again() -> None:
    d = Driven()
    due = f"{early_time(d.step) - 2:.3f}"  # this machine's clock 2 s ahead of Redis's
    step = d.answer([due.encode(), 0, 0])
    index = [("ZADD", P + "due", "LT", "CH", due, "mail"), ("SADD", P + "topics", "mail")]
    assert step == _ops.Commands(index, tolerate=True)  # a refused index write is not the push's error
    assert d.answer([1, 0]) == _ops.Commands([("PUBLISH", P + "wake", due)], tolerate=True)
    assert d.answer([1]) is None and d.result == float(due)


def test_noscript_loads_the_script_sends_again_and_always_wakes() -> None:
    d = Driven()
    first = d.step
    due = f"{early_time(first) + 0.1:.3f}"
    again = d.answer([NoScriptError("NOSCRIPT No matching script."), 1, 1])
    assert again == first._replace(text=True)  # the same pipeline again, the script by its text
    # its ZADD changed nothing (the first one's did): the wake goes all the same
    assert d.answer([due.encode(), 0, 0]) == _ops.Commands([("PUBLISH", P + "wake", due)], tolerate=True)


def test_a_taken_id_writes_nothing_more() -> None:
    d = Driven(if_absent=True)
    with pytest.raises(IdTakenError):
        d.answer([[b"mail", b"100.000"], 1, 1])


def test_the_classic_push_is_one_script_call() -> None:
    op = _ops.push(Keys(P, "classic"), "mail", "1", 60, b"", 3600, None, None, False)
    assert isinstance(next(op), _ops.ScriptCall)


# -- against redis-server: the script cache flushed ----------------------------------


def flushed_then_pushed(raw: "redis.Redis", wake: WakeListener, push: Any) -> None:
    """``push(topic, id, delay)`` on a new topic after SCRIPT FLUSH: its first
    pipeline's ZADD lowers the index and the script is missing, so the pipeline
    sent again lowers nothing: the wake must go all the same."""
    push("warm", "1", 100)
    assert wake.next() is not None
    raw.script_flush()
    due = push("new", "1", 100)
    assert raw.zscore(key(P, "new", "pool"), "1") == due
    indexed(raw, "new", due, P)
    assert raw.sismember(P + "topics", "new")
    assert float(wake.next() or 0) == due


def test_after_script_flush_the_sync_push_still_wakes(url: str, raw: "redis.Redis", wake: WakeListener) -> None:
    with Delayer(url, P, layout="topic") as d:
        flushed_then_pushed(raw, wake, d.push)


def test_after_script_flush_the_async_push_still_wakes(url: str, raw: "redis.Redis", wake: WakeListener) -> None:
    dues: List[float] = []

    async def main() -> None:
        async with aio.Delayer(url, P, layout="topic") as d:
            # the listener reads on this thread: each push is awaited before it
            dues.append(await d.push("warm", "1", 100))
            assert wake.next() is not None
            raw.script_flush()
            dues.append(await d.push("new", "1", 100))

    run(main)
    due = dues[1]
    assert raw.zscore(key(P, "new", "pool"), "1") == due
    indexed(raw, "new", due, P)
    assert raw.sismember(P + "topics", "new")
    assert float(wake.next() or 0) == due
