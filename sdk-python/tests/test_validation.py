"""Input rules (docs/PROTOCOL.md): each violation raises InvalidArgument and touches nothing."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict

import pytest
import redis

from delayer import Backoff, Delayer, InvalidArgument, Job, Message, ReservedMessage
from delayer import _calls, _rules, _waits

# Any non-empty text is a name (test_odd_names.py); only these are not.
BAD_NAMES = [
    "",
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
    [Job("t", "ok-1", 0), Job("t", "", 0), Job("t", "ok-2", 0)]
)
CASES["push_many-bad-last-of-250"] = lambda d: d.push_many(
    [Job(f"t{i % 3}", f"ok-{i}", 0) for i in range(249)] + [Job("t", "late", 0, b"", 0)]
)
CASES["push_many-bad-in-second-call"] = lambda d: d.push_many(
    [Job(f"t{i % 3}", f"ok-{i}" if i != 150 else "", 0) for i in range(250)]
)
CASES["push_many-not-job"] = lambda d: d.push_many([Job("t", "ok", 0), ("t", "x", 0)])  # type: ignore[list-item]
CASES["push_many-not-iterable"] = lambda d: d.push_many(5)  # type: ignore[arg-type]

# the at-least-once mode
BAD_TTRS = [0, 0.0, -1, -0.5, 0.0004, 315_360_000.001, True, math.nan, math.inf, "5", None]
BAD_MAX_ATTEMPTS = [-1, 1_000_001, True, False, 2.0, 2.5, "3"]
BAD_COUNTS = [0, 1001, -1, True, 1.0, "10", None]
HELD = ReservedMessage("j", "t", b"", 1, 25, "7", 0.0)
for i, bad in enumerate(BAD_NAMES):
    CASES[f"reserve-topic-{i}"] = lambda d, bad=bad: d.reserve(bad, 1)
    CASES[f"breserve-topic-{i}"] = lambda d, bad=bad: d.breserve(bad, 1, 0.1)
    CASES[f"ack-id-{i}"] = lambda d, bad=bad: d.ack(bad)
    CASES[f"touch-id-{i}"] = lambda d, bad=bad: d.touch(bad, 1)
    CASES[f"release-id-{i}"] = lambda d, bad=bad: d.release(bad, 1, "3")
    CASES[f"bury-id-{i}"] = lambda d, bad=bad: d.bury(bad)
    CASES[f"reschedule-id-{i}"] = lambda d, bad=bad: d.reschedule(bad, 1)
    CASES[f"dead_letters-topic-{i}"] = lambda d, bad=bad: d.dead_letters(bad)
    CASES[f"requeue_dead-topic-{i}"] = lambda d, bad=bad: d.requeue_dead(bad)
    CASES[f"purge_dead-id-{i}"] = lambda d, bad=bad: d.purge_dead("t", ["ok", bad])
    # flow control
    CASES[f"pause-topic-{i}"] = lambda d, bad=bad: d.pause(bad)
    CASES[f"resume-topic-{i}"] = lambda d, bad=bad: d.resume(bad)
    CASES[f"is_paused-topic-{i}"] = lambda d, bad=bad: d.is_paused(bad)
    CASES[f"flow-topic-{i}"] = lambda d, bad=bad: d.flow(bad)
for i, bad in enumerate(BAD_TTRS):
    CASES[f"reserve-ttr-{i}"] = lambda d, bad=bad: d.reserve("t", bad)
    CASES[f"breserve-ttr-{i}"] = lambda d, bad=bad: d.breserve("t", bad, 0.1)
    CASES[f"touch-ttr-{i}"] = lambda d, bad=bad: d.touch("j", bad)
for i, bad in enumerate(BAD_TIMEOUTS):
    CASES[f"breserve-timeout-{i}"] = lambda d, bad=bad: d.breserve("t", 1, bad)
for i, bad in enumerate(BAD_MAX_ATTEMPTS):
    CASES[f"push-max_attempts-{i}"] = lambda d, bad=bad: d.push("t", "id", 0, max_attempts=bad)
    CASES[f"push_many-max_attempts-{i}"] = lambda d, bad=bad: d.push_many(
        [Job("t", "a", 0), Job("t", "b", 0, max_attempts=bad)]
    )
for i, bad in enumerate(BAD_DELAYS):
    CASES[f"backoff-fixed-{i}"] = lambda d, bad=bad: d.push("t", "id", 0, backoff=Backoff.fixed(bad))
    CASES[f"backoff-base-{i}"] = lambda d, bad=bad: d.push("t", "id", 0, backoff=Backoff.exponential(bad, 60))
    CASES[f"backoff-max-{i}"] = lambda d, bad=bad: d.push("t", "id", 0, backoff=Backoff.exponential(0, bad))
    if bad is not None:  # release without a delay uses the backoff
        CASES[f"release-delay-{i}"] = lambda d, bad=bad: d.release("j", bad)
    CASES[f"reschedule-delay-{i}"] = lambda d, bad=bad: d.reschedule("j", bad)
for i, bad in enumerate(BAD_COUNTS):
    CASES[f"dead_letters-count-{i}"] = lambda d, bad=bad: d.dead_letters("t", 0, bad)
CASES["backoff-max-below-base"] = lambda d: d.push("t", "id", 0, backoff=Backoff.exponential(5, 4.999))
CASES["backoff-built-by-hand"] = lambda d: d.push("t", "id", 0, backoff=Backoff("linear", 1, 1))
CASES["backoff-not-a-backoff"] = lambda d: d.push("t", "id", 0, backoff=("fixed", 1))  # type: ignore[arg-type]
CASES["dead_letters-start-negative"] = lambda d: d.dead_letters("t", -1, 10)
CASES["dead_letters-start-float"] = lambda d: d.dead_letters("t", 0.0, 10)  # type: ignore[arg-type]
CASES["requeue_dead-ids-str"] = lambda d: d.requeue_dead("t", "abc")
CASES["requeue_dead-ids-not-iterable"] = lambda d: d.requeue_dead("t", 5)  # type: ignore[arg-type]
CASES["purge_dead-bad-id-late"] = lambda d: d.purge_dead("t", [f"ok-{n}" for n in range(1500)] + [""])
CASES["ack-receipt-int"] = lambda d: d.ack("j", 7)  # type: ignore[arg-type]
CASES["ack-receipt-surrogate"] = lambda d: d.ack("j", "\ud800")
CASES["ack-job-int"] = lambda d: d.ack(7)  # type: ignore[arg-type]
CASES["ack-reserved-and-receipt"] = lambda d: d.ack(HELD, "7")
CASES["release-reserved-and-receipt"] = lambda d: d.release(HELD, None, "7")
CASES["touch-receipt-empty"] = lambda d: d.touch("j", 1, "")
CASES["touch-receipt-int"] = lambda d: d.touch("j", 1, 7)  # type: ignore[arg-type]
CASES["touch-reserved-and-receipt"] = lambda d: d.touch(HELD, 1, "7")
CASES["touch-reserved-empty-receipt"] = lambda d: d.touch(ReservedMessage("j", "t", b"", 1, 25, "", 0.0), 1)
CASES["bury-reserved-bad-id"] = lambda d: d.bury(ReservedMessage("", "t", b"", 1, 25, "7", 0.0))


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
    assert not any(
        k in stats for k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_brpop", "cmdstat_blmove", "cmdstat_script")
    )


def test_reliable_limits_are_inclusive(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "a", 0, max_attempts=0, backoff=Backoff.fixed(0))
        d.push("t", "b", 0, max_attempts=1_000_000, backoff=Backoff.exponential(315_360_000, 315_360_000))
        d.push("t", "c", 0, backoff=Backoff.exponential(0, 0))
        assert d.reserve("t", 0.0005) is None  # rounds to 1 ms: allowed
        assert d.reserve("t", 315_360_000) is None
        assert d.dead_letters("t", 0, 1000) == []
        assert d.dead_letters("t", 10**6, 1) == []
        assert d.requeue_dead("t", []) == 0
        assert d.purge_dead("t", iter(())) == 0
    assert raw.hget("delayer:job_bucket:a", "max_attempts") == b"0"
    assert raw.hmget("delayer:job_bucket:b", "max_attempts", "backoff_ms", "backoff_max_ms") == [
        b"1000000",
        b"315360000000",
        b"315360000000",
    ]


def test_backoff_values() -> None:
    assert Backoff.fixed(1.2345) == Backoff("fixed", 1235, 1235)
    assert Backoff.fixed(3) == Backoff("fixed", 3000, 3000)
    assert Backoff.exponential(0.5, 60) == Backoff("exponential", 500, 60_000)
    # compared once rounded to the millisecond, as the other SDKs do
    assert Backoff.exponential(1.0004, 1.0001) == Backoff("exponential", 1000, 1000)
    with pytest.raises(InvalidArgument, match="below"):
        Backoff.exponential(1.002, 1.001)
    with pytest.raises(InvalidArgument):
        Backoff("fixed", 1000, 2000)
    with pytest.raises(InvalidArgument):
        Backoff("exponential", 1000, True)
    b = Backoff.fixed(1)
    with pytest.raises(AttributeError):
        b.kind = "exponential"  # type: ignore[misc]


def test_ttr_rounds_like_a_delay() -> None:
    assert _rules.ttr_ms(0.0005) == 1
    assert _rules.ttr_ms(1.2345) == 1235
    assert _rules.ttr_ms(30) == 30_000
    with pytest.raises(InvalidArgument, match="at least 1 ms"):
        _rules.ttr_ms(0.00049)


def test_dead_ids_go_1000_per_call() -> None:
    from delayer import Keys

    every, calls = _calls.dead_take_calls(Keys("p:"), "purge", "t", (f"i{n}" for n in range(2500)))
    assert every is None
    assert [len(c.args) - 4 for c in calls] == [1000, 1000, 500]
    assert calls[2].keys == ["p:dead:t", "p:job_pool", "p:scheduled_count"]
    assert calls[2].args[:6] == ["p:job_bucket:", "t", "purge", 500, "i2000", "i2001"]
    every, calls = _calls.dead_take_calls(Keys("p:"), "requeue", "t", None)
    assert every is not None and calls == []
    assert every.args == ["p:job_bucket:", "t", "requeue p:wake", 1000]  # a re-queue announces on the channel
    assert _calls.dead_take_calls(Keys(), "purge", "t", []) == (None, [])


def test_push_sends_retry_settings_only_when_given() -> None:
    from delayer import Keys

    # "" leaves a retry setting out, so the bucket stays exactly 1.x's;
    # then the duplicate policy, the wake channel and the traceparent
    plain = _calls.push_call(Keys(), "t", "j", 1, b"x", 60)
    assert plain.args == ["j", "t", b"x", 1000, 60_000, "", "", "", "", "replace", "delayer:wake", ""]
    some = _calls.push_call(Keys(), "t", "j", 1, b"x", 60, max_attempts=3)
    assert some.args[5:9] == [3, "", "", ""]
    both = _calls.push_call(Keys("p:"), "t", "j", 1, b"x", 60, 0, Backoff.exponential(2, 10), True)
    assert both.args[5:] == [0, "exponential", 2000, 10_000, "absent", "p:wake", ""]


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
    calls = _calls.push_many_batches(Keys("p:"), jobs).calls
    assert [len(_calls.push_many_ids(c)) for c in calls] == [100, 100, 50]
    assert all(c.keys == ["p:job_pool", "p:scheduled_count"] for c in calls)
    assert calls[1].args[:3] == ["p:job_bucket:", "replace", "p:wake"]
    # ten values per job: then four retry settings and the traceparent ("" = not set)
    assert calls[1].args[3:13] == ["j100", "t1", b"b100", 100_000, 10_000, "", "", "", "", ""]
    assert calls[2].args[-10:] == ["j249", "t0", b"b249", 249_000, 10_000, "", "", "", "", ""]
    assert len(calls[2].args) == 3 + 50 * 10
    assert _calls.push_many_batches(Keys("p:"), jobs[:1], True).calls[0].args[1] == "absent"
    assert [len(c) for c in _calls.chunks(_calls.push_many_batches(Keys(), jobs * 9).calls)] == [10, 10, 3]
    assert _calls.push_many_batches(Keys(), []).calls == []


def test_delay_rounds_to_nearest_millisecond() -> None:
    assert _rules.delay_ms(0) == 0
    assert _rules.delay_ms(2) == 2000
    assert _rules.delay_ms(2.5) == 2500
    assert _rules.delay_ms(1.0004) == 1000
    assert _rules.delay_ms(1.0006) == 1001
    assert _rules.delay_ms(0.0015) == 2
    assert _rules.delay_ms(0.0004) == 0
    assert _rules.delay_ms(315_360_000) == 315_360_000_000


def test_brpop_seconds_never_sends_zero_for_a_deadline() -> None:
    assert _waits.seconds(10.0, 10.0) is None
    assert _waits.seconds(10.0, 10.5) is None
    assert _waits.seconds(10.0001, 10.0) == 0.001
    assert _waits.seconds(10.25, 10.0) == 0.25
    # one wait is at most a slice, also "forever" (0): a dead connection is noticed
    assert _waits.seconds(None, 5.0) == _waits.WAIT_SLICE
    assert _waits.seconds(1000.0, 10.0) == _waits.WAIT_SLICE


def test_message_is_frozen_and_decodes_text() -> None:
    m = Message(id="a", topic="t", body="héllo".encode())
    assert m.text == "héllo"
    with pytest.raises(AttributeError):
        m.id = "b"  # type: ignore[misc]
