"""pause, resume, is_paused and flow (design 23, slice 3: flow.lua and
flow_topic.lua behind the public calls), with the sync client, in both
layouts: what each call answers, what it writes in Redis (the names spelled
out by flowkit, not taken from the SDK) and what it announces. How consumers
obey a pause is test_flow.py's; these are the calls themselves."""

from __future__ import annotations

import re
from typing import Any, Dict, Tuple

import pytest
import redis

from delayer import Delayer, FlowState, ProtocolError

from conftest import redis_now
from flowkit import P, make_ready, names, ready, d, layout  # noqa: F401 (fixtures)
from topickit import WakeListener



def snapshot(raw: "redis.Redis") -> Dict[Any, Tuple[Any, Any]]:
    """Every key's type and value (DUMP: the value, not its TTL)."""
    return {k: (raw.type(k), raw.dump(k)) for k in raw.keys("*")}


def escaped(key: str) -> str:
    return re.escape(key)


def test_pause_then_resume_answer_whether_they_changed_the_state(
    d: Delayer, raw: "redis.Redis", layout: str
) -> None:
    n = names(layout)
    assert d.is_paused("t") is False
    running = d.flow("t")
    assert running == FlowState(paused_since=None, held=0, changed=False, at=running.at) and not running.paused
    before = redis_now(raw)
    assert d.pause("t") is True
    assert d.is_paused("t") is True
    state = d.flow("t")
    assert state.paused and state.changed is False  # a read changes nothing
    assert state.paused_since is not None and before - 0.002 <= state.paused_since <= redis_now(raw)
    assert abs(state.at - redis_now(raw)) < 5
    assert raw.hget(n["flow"], "paused") == f"{state.paused_since:.3f}".encode()
    assert not raw.exists(n["gate"])  # deleted: waiters block on it
    # Paused already: False, and the pause keeps its first time.
    assert d.pause("t") is False
    assert d.flow("t").paused_since == state.paused_since
    assert d.resume("t") is True
    assert d.is_paused("t") is False
    assert d.flow("t").paused_since is None
    flow = raw.hgetall(n["flow"])
    assert b"paused" not in flow
    assert flow[b"last_paused"] == f"{state.paused_since:.3f}".encode()
    assert float(flow[b"resumed"]) >= state.paused_since
    assert raw.lrange(n["gate"], 0, -1) == [b"1"] and 0 < raw.pttl(n["gate"]) <= 60000  # wakes every waiter
    assert d.resume("t") is False
    # Another topic is not touched.
    assert d.is_paused("other") is False


def test_a_paused_topic_hands_out_nothing_until_resumed(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    for i in range(3):
        d.push("t", f"j{i}", 0)
    make_ready(raw, layout, 3)
    d.pause("t")
    assert d.pop("t") is None and d.reserve("t", 30) is None
    assert d.bpop("t", 0.2) is None and d.breserve("t", 30, 0.2) is None
    assert d.reserve_many("t", 30, 5) == ([], [])
    assert ready(raw, layout) == [b"j2", b"j1", b"j0"]
    d.resume("t")
    got = [d.pop("t"), d.reserve("t", 30)]
    assert [m.id for m in got if m is not None] == ["j0", "j1"]


def test_held_counts_the_due_jobs_a_per_topic_pause_holds(url: str, raw: "redis.Redis") -> None:
    with Delayer(url, P, layout="topic") as d:
        for i in range(3):
            d.push("t", f"due-{i}", 0)
        d.push("t", "later", 3600)
        assert d.flow("t").held == 0  # running: nothing held, whatever is due
        d.pause("t")
        # No server runs: the due jobs wait in the topic's pool, and a paused topic's server would not move them.
        assert d.flow("t").held == 3
        d.push("t", "due-3", 0)
        assert d.flow("t").held == 4
        d.resume("t")
        assert d.flow("t").held == 0
        assert raw.zcard(names("topic")["pool"]) == 5  # the calls only count


def test_held_counts_the_classic_flow_pool(url: str, raw: "redis.Redis") -> None:
    aside = f"{P}flow_pool:t"
    with Delayer(url, P) as d:
        d.pause("t")
        assert d.flow("t").held == 0
        # What the server's move.lua sets aside for a listed topic (no server runs here): the ids, by due time.
        raw.zadd(aside, {"a": 1.0, "b": 2.0, "c": 3.0})
        assert d.flow("t").held == 3
        assert d.resume("t") is True
        # The server drains it (move_flow.lua) once the topic runs: until then it is still counted.
        assert d.flow("t").held == 3
        assert raw.zcard(aside) == 3


def test_a_classic_pause_lists_the_topic_for_the_server(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.pause("t")
    d.pause("u")
    if layout == "classic":
        assert raw.smembers(f"{P}flow_topics") == {b"t", b"u"}
        d.resume("t")
        # Listed until the server finds its flow pool empty (move_flow.lua takes it off).
        assert raw.sismember(f"{P}flow_topics", "t")
    else:
        # Per topic the server holds a paused topic's jobs in its pool: no list.
        assert not raw.exists(f"{P}flow_topics")


def test_resume_of_a_running_topic_writes_nothing(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    listener = WakeListener(raw, P)
    try:
        assert d.resume("t") is False  # never paused
        assert raw.dbsize() == 0
        d.pause("t")
        d.resume("t")
        first = listener.next()
        before = snapshot(raw)
        assert d.resume("t") is False  # resumed already: the resume's times and the gate stay as they were
        assert snapshot(raw) == before
        # Published nothing either: the next message is the next real
        # resume's, of another topic (two in one millisecond read alike).
        d.pause("u")
        d.resume("u")
        second = listener.next()
    finally:
        listener.close()
    assert first is not None and second is not None
    assert [m.split(b" ", 1)[1] for m in (first, second)] == [b"t", b"u"]


def test_resume_announces_the_topic_on_the_wake_channel(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    listener = WakeListener(raw, P)
    try:
        d.pause("mail box")
        d.resume("mail box")
        message = listener.next()
    finally:
        listener.close()
    # "<now> <topic>", now the resume's own time (the flow hash's "resumed"); a pause announces nothing.
    assert message is not None and re.fullmatch(rb"\d+\.\d{3} mail box", message), message
    assert message.split(b" ", 1)[0] == raw.hget(names(layout, "mail box")["flow"], "resumed")


def test_a_flow_hash_of_the_wrong_type_is_named_and_nothing_is_written(
    d: Delayer, raw: "redis.Redis", layout: str
) -> None:
    key = names(layout)["flow"]
    raw.set(key, "paused")
    for call in (lambda: d.pause("t"), lambda: d.resume("t"), lambda: d.is_paused("t"), lambda: d.flow("t")):
        with pytest.raises(ProtocolError, match=escaped(key)) as e:
            call()
        assert "WRONGTYPE" in str(e.value)
    assert snapshot(raw) == {key.encode(): (b"string", raw.dump(key))}


def test_a_gate_of_the_wrong_type_is_replaced(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    """The gate is only deleted and written: junk there does not block a pause or a resume."""
    gate = names(layout)["gate"]
    raw.set(gate, "junk")
    assert d.pause("t") is True
    assert raw.exists(gate) == 0
    raw.set(gate, "junk")
    assert d.resume("t") is True
    assert raw.lrange(gate, 0, -1) == [b"1"]


def test_a_classic_flow_topics_of_the_wrong_type_is_named(url: str, raw: "redis.Redis") -> None:
    raw.set(f"{P}flow_topics", "t")
    with Delayer(url, P) as d:
        with pytest.raises(ProtocolError, match=escaped(f"{P}flow_topics")):
            d.pause("t")
    assert raw.dbsize() == 1  # the flow hash was not written: checked before any write


def test_a_pause_written_by_hand_is_read(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    # As PROTOCOL.md says to pause before there was a call: any value pauses.
    flow = names(layout)["flow"]
    raw.hset(flow, "paused", "1700000000.5")
    assert d.is_paused("t") and d.flow("t").paused_since == 1700000000.5
    raw.hset(flow, "paused", "yes")
    assert d.is_paused("t") and d.flow("t").paused_since == 0.0
    assert d.pause("t") is False and raw.hget(flow, "paused") == b"yes"
    assert d.resume("t") is True and not d.is_paused("t")


# -- the decoder, without Redis --------------------------------------------------------------------


def test_the_reply_is_decoded_in_one_place() -> None:
    from delayer import RateLimit, _replies

    assert _replies.flow([b"1700000000.123", 1, b"1700000001.500", 7, b"", b""]) == FlowState(
        1700000000.123, 7, True, 1700000001.5)
    assert _replies.flow([b"", 0, b"1700000001.500", 0, b"", b""]) == FlowState(None, 0, False, 1700000001.5)
    assert _replies.flow([b"", 0, b"1.0", 2, b"0.5", b"3"]).rate_limit == RateLimit(0.5, 3)
    for bad in (None, b"1", [b"", 0, b"1.0"], [b"", 0, b"1.0", 0], [b"", 0, b"1.0", 0, b""],
                [b"", 0, b"1.0", 0, b"", b"", b""], [b"", 2, b"1.0", 0, b"", b""], [b"", 0, b"now", 0, b"", b""],
                [b"", 0, b"1.0", -1, b"", b""], [b"", 0, b"1.0", b"3", b"", b""], [1, 0, b"1.0", 0, b"", b""],
                [b"", True, b"1.0", 0, b"", b""], [b"", 0, b"1.0", 0, 5, b""], [b"", 0, b"1.0", 0, b"5", None]):
        with pytest.raises(ProtocolError):
            _replies.flow(bad)
