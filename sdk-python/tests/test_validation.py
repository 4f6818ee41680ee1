"""Input rules (docs/PROTOCOL.md): each violation raises InvalidArgument and touches nothing."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict

import pytest
import redis

from delayer import Delayer, InvalidArgument, Job, Message
from delayer import _core

BAD_NAMES = [
    "",
    "a b",
    "a\tb",
    "a\nb",
    "a\u00a0b",  # no-break space
    "a\u3000b",  # ideographic space
    "a\x00b",
    "a\x1bb",
    "a\x7fb",
    "a\x85b",
    "a{b",
    "a}b",
    "x" * 201,
    "\u00e9" * 101,  # 202 bytes of UTF-8
    "a\ud800",  # lone surrogate: not UTF-8
    b"bytes",
    123,
    None,
]
BAD_DELAYS = [-1, -0.001, 315_360_000.001, 315_360_001, True, math.nan, math.inf, -math.inf, "5", None]
BAD_LIFETIMES = [0, -1, 0.5, 1.5, 315_360_001, True, math.nan, math.inf, "60", None]
BAD_TIMEOUTS = [-0.001, -1, math.nan, math.inf, True, "1", None]

CASES: Dict[str, Callable[[Delayer], Any]] = {}
for i, bad in enumerate(BAD_NAMES):
    CASES[f"push-id-{i}"] = lambda d, bad=bad: d.push("topic", bad, 0)
    CASES[f"push-topic-{i}"] = lambda d, bad=bad: d.push(bad, "id", 0)
    CASES[f"pop-topic-{i}"] = lambda d, bad=bad: d.pop(bad)
    CASES[f"bpop-topic-{i}"] = lambda d, bad=bad: d.bpop(bad, 0.1)
    CASES[f"remove-id-{i}"] = lambda d, bad=bad: d.remove(bad)
for i, bad in enumerate(BAD_DELAYS):
    CASES[f"push-delay-{i}"] = lambda d, bad=bad: d.push("t", "id", bad)
for i, bad in enumerate(BAD_LIFETIMES):
    CASES[f"push-lifetime-{i}"] = lambda d, bad=bad: d.push("t", "id", 1, b"", bad)
for i, bad in enumerate(BAD_TIMEOUTS):
    CASES[f"bpop-timeout-{i}"] = lambda d, bad=bad: d.bpop("t", bad)
CASES["push-body-int"] = lambda d: d.push("t", "id", 1, 123)
CASES["push-body-surrogate"] = lambda d: d.push("t", "id", 1, "\ud800")
CASES["push_many-one-bad"] = lambda d: d.push_many(
    [Job("t", "ok-1", 0), Job("t", "bad id", 0), Job("t", "ok-2", 0)]
)
CASES["push_many-bad-last-of-250"] = lambda d: d.push_many(
    [Job(f"t{i % 3}", f"ok-{i}", 0) for i in range(249)] + [Job("t", "late", 0, b"", 0)]
)
CASES["push_many-bad-in-second-call"] = lambda d: d.push_many(
    [Job(f"t{i % 3}", f"ok-{i}" if i != 150 else "a{b}", 0) for i in range(250)]
)
CASES["push_many-not-job"] = lambda d: d.push_many([Job("t", "ok", 0), ("t", "x", 0)])  # type: ignore[list-item]
CASES["push_many-not-iterable"] = lambda d: d.push_many(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CASES))
def test_violation_raises_and_touches_nothing(name: str, url: str, raw: "redis.Redis") -> None:
    raw.config_resetstat()
    with Delayer(url) as d:
        with pytest.raises(InvalidArgument) as info:
            CASES[name](d)
    assert isinstance(info.value, ValueError)
    assert raw.dbsize() == 0
    # nothing but our own INFO/CONFIG ran: no script, no BRPOP
    stats = raw.info("commandstats")
    assert not any(k in stats for k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_brpop", "cmdstat_script"))


def test_limits_are_inclusive(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t" * 200, "x" * 200, 315_360_000, b"", 315_360_000)
        d.push("t", "\u00e9" * 100, 0, b"", 1)
        d.push("t", "float-life", 0.0, b"", 60.0)  # type: ignore[arg-type]
        d.push("t:sub/ü-ok", "order:42#confirm", 0)
    assert raw.zcard("delayer:job_pool") == 4


def test_push_many_calls_take_100_jobs_each() -> None:
    from delayer import Keys

    jobs = [Job(f"t{i % 3}", f"j{i}", i, f"b{i}", ready_max_lifetime=10) for i in range(250)]
    calls = _core.push_many_calls(Keys("p:"), jobs)
    assert [_core.push_many_jobs(c) for c in calls] == [100, 100, 50]
    assert all(c.keys == ["p:job_pool"] for c in calls)
    assert calls[1].args[0] == "p:job_bucket:"
    assert calls[1].args[1:6] == ["j100", "t1", b"b100", 100_000, 10_000]
    assert calls[2].args[-5:] == ["j249", "t0", b"b249", 249_000, 10_000]
    assert [len(c) for c in _core.chunks(_core.push_many_calls(Keys(), jobs * 9))] == [10, 10, 3]
    assert _core.push_many_calls(Keys(), []) == []


def test_delay_rounds_to_nearest_millisecond() -> None:
    assert _core.delay_ms(0) == 0
    assert _core.delay_ms(2) == 2000
    assert _core.delay_ms(2.5) == 2500
    assert _core.delay_ms(1.0004) == 1000
    assert _core.delay_ms(1.0006) == 1001
    assert _core.delay_ms(0.0015) == 2
    assert _core.delay_ms(0.0004) == 0
    assert _core.delay_ms(315_360_000) == 315_360_000_000


def test_brpop_seconds_never_sends_zero_for_a_deadline() -> None:
    assert _core.brpop_seconds(None, 5.0) == 0
    assert _core.brpop_seconds(10.0, 10.0) is None
    assert _core.brpop_seconds(10.0, 10.5) is None
    assert _core.brpop_seconds(10.0001, 10.0) == 0.001
    assert _core.brpop_seconds(10.25, 10.0) == 0.25


def test_message_is_frozen_and_decodes_text() -> None:
    m = Message(id="a", topic="t", body="héllo".encode())
    assert m.text == "héllo"
    with pytest.raises(AttributeError):
        m.id = "b"  # type: ignore[misc]
