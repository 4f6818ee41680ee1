"""A topic's pause as the inspecting calls see it (issue 23): stats gives each
topic's ``paused``, ``paused_since`` and ``held`` (classic: stats.lua reads the
flow hash and the flow pool, and lists the topics of ``flow_topics``; per
topic: HGET of the flow hash and ZCOUNT of the pool's due jobs), and job's
lookup.lua its ``flow``. Sync and asyncio, both layouts, on a real Redis; the
decoders without one."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
import redis

from delayer import Delayer, Keys, ProtocolError
from delayer.aio import Delayer as AsyncDelayer
from delayer.inspect import JobInfo, Stats, TopicStats, job_op, stats_op

from conftest import redis_now, run
from flowkit import P, make_ready, names, d, layout  # noqa: F401 (fixtures)



def listed(raw: "redis.Redis", *topics: str) -> None:
    """The topics as the server records those it moved (the per-topic layout's
    stats lists only these; the classic stats.lua also those of the counts)."""
    raw.sadd(P + "topics", *topics)


def by_topic(stats: Stats) -> Dict[str, TopicStats]:
    return {t.topic: t for t in stats.topics}


def test_stats_say_which_topics_are_paused_since_when_and_what_they_hold(
    d: Delayer, raw: "redis.Redis", layout: str
) -> None:
    for topic in ("t", "u"):
        for i in range(2):
            d.push(topic, f"{topic}-due-{i}", 0)
        d.push(topic, f"{topic}-later", 3600)
    listed(raw, "t", "u")
    running = by_topic(d.stats())
    assert [(s.paused, s.paused_since, s.held) for s in running.values()] == [(False, None, 0)] * 2

    before = redis_now(raw)
    assert d.pause("t") is True
    if layout == "classic":
        # What the server's move.lua sets aside for a paused topic (no server runs here): the due ids.
        raw.zadd(f"{P}flow_pool:t", {"t-due-0": 1.0, "t-due-1": 2.0})
    stats = d.stats()
    t, u = by_topic(stats)["t"], by_topic(stats)["u"]
    since = d.flow("t").paused_since
    assert since is not None and before - 0.002 <= since <= redis_now(raw)
    assert (t.paused, t.paused_since, t.held) == (True, since, 2)
    assert (u.paused, u.paused_since, u.held) == (False, None, 0)  # another topic runs on
    assert (t.scheduled, t.ready, t.reserved, t.dead) == (3, 0, 0, 0)  # held jobs are still counted as scheduled
    assert (u.scheduled, u.ready, u.reserved, u.dead) == (3, 0, 0, 0)
    assert stats.scheduled_total == 6

    assert d.resume("t") is True
    t = by_topic(d.stats())["t"]
    assert (t.paused, t.paused_since) == (False, None)
    # Per topic nothing is held once it runs; the classic flow pool is counted until the server drains it.
    assert t.held == (2 if layout == "classic" else 0)


def test_a_paused_classic_topic_without_jobs_is_listed(url: str, raw: "redis.Redis") -> None:
    with Delayer(url, P) as d:
        assert d.stats().topics == []
        d.pause("quiet")
        since = d.flow("quiet").paused_since
        assert since is not None
        # Listed through <prefix>flow_topics: an operator sees the pause with nothing queued.
        assert d.stats().topics == [TopicStats("quiet", 0, 0, 0, 0, paused=True, paused_since=since, held=0)]
        d.resume("quiet")
        # Still in flow_topics until the server finds its flow pool empty: listed, running.
        assert d.stats().topics == [TopicStats("quiet", 0, 0, 0, 0)]


def test_a_pause_written_by_hand_or_a_flow_hash_of_the_wrong_type_pauses_in_stats(
    d: Delayer, raw: "redis.Redis", layout: str
) -> None:
    flow = names(layout)["flow"]
    d.push("t", "due", 0)
    listed(raw, "t")
    raw.hset(flow, "paused", "1700000000.5")
    assert (by_topic(d.stats())["t"].paused, by_topic(d.stats())["t"].paused_since) == (True, 1700000000.5)
    raw.hset(flow, "paused", "yes")  # any value pauses; "yes" is no time
    t = by_topic(d.stats())["t"]
    assert (t.paused, t.paused_since) == (True, None)
    raw.delete(flow)
    raw.set(flow, "paused")  # nothing of the topic is handed out: paused, since unknown
    t = by_topic(d.stats())["t"]
    assert (t.paused, t.paused_since) == (True, None)
    assert t.held == (0 if layout == "classic" else 1)  # per topic: its due job in the pool
    assert t.scheduled == 1


def test_lookup_says_whether_the_jobs_topic_is_paused(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.push("t", "s", 3600)
    d.push("t", "r", 0)
    make_ready(raw, layout, 1)
    d.push("u", "other", 3600)
    assert [d.job("t", i).flow for i in ("s", "r")] == ["", ""]
    d.pause("t")
    scheduled, ready = d.job("t", "s"), d.job("t", "r")
    assert (scheduled.state, scheduled.flow) == ("scheduled", "paused")
    assert (ready.state, ready.flow) == ("ready", "paused")
    assert d.job("u", "other").flow == ""  # another topic's job
    assert d.job("t", "nothing") == JobInfo("nothing", "unknown", None, None, None, None, None, None, None, None,
                                            None, None, "")
    assert d.job("u", "s").state == "unknown" and d.job("u", "s").flow == ""  # of another topic than asked
    d.resume("t")
    assert [d.job("t", i).flow for i in ("s", "r")] == ["", ""]
    # A flow hash of the wrong type stops the topic too.
    flow = names(layout)["flow"]
    raw.delete(flow)
    raw.set(flow, "x")
    assert d.job("t", "s").flow == "paused" and d.job("t", "s").state == "scheduled"


def test_the_async_client_sees_the_same(url: str, raw: "redis.Redis", layout: str) -> None:
    async def main() -> None:
        async with AsyncDelayer(url, P, layout=layout) as d:
            await d.push("t", "a", 0)
            listed(raw, "t")
            await d.pause("t")
            if layout == "classic":
                raw.zadd(f"{P}flow_pool:t", {"a": 1.0})
            since = (await d.flow("t")).paused_since
            t = by_topic(await d.stats())["t"]
            assert (t.paused, t.paused_since, t.held) == (True, since, 1) and since is not None
            assert (await d.job("t", "a")).flow == "paused"
            await d.resume("t")
            assert (await d.job("t", "a")).flow == ""
            assert by_topic(await d.stats())["t"].paused is False

    run(main)


# -- the builders and decoders, without Redis ------------------------------------------------------


def test_lookup_decodes_flow_and_refuses_other_shapes() -> None:
    def decode(reply: Any) -> JobInfo:
        op = job_op(Keys(P), "t", "a")
        next(op)
        with pytest.raises(StopIteration) as done:
            op.send(reply)
        info: JobInfo = done.value.value
        return info

    fields: List[Any] = [b"scheduled", b"t", b"1", b"0", b"", b"1700000000.250", b"", b"", b""]
    assert decode([*fields, b"paused"]).flow == "paused"
    assert decode([*fields, b""]).flow == ""
    for bad in (fields, [*fields, b"", b""], [*fields, b"stopped"], None):
        with pytest.raises(ProtocolError):
            decode(bad)


def stats_reply(*entries: List[Any]) -> List[Any]:
    return [5, 0, 1, *entries]


def decode_stats(reply: Any) -> Stats:
    op = stats_op(Keys(P))
    next(op)
    with pytest.raises(StopIteration) as done:
        op.send(reply)
    stats: Stats = done.value.value
    return stats


def test_stats_lua_entries_read_the_pause() -> None:
    none = [b"", b""]  # no rate limit (stats.lua's per_second and burst)
    stats = decode_stats(stats_reply([b"a", 1, 0, 0, 0, b"", 0, *none], [b"b", 2, 0, 0, 0, b"1700000000.125", 3, *none],
                                     [b"c", 0, 0, 0, 0, b"?", 0, *none], [b"d", 0, 0, 0, 0, b"yes", 1, *none]))
    assert [(t.topic, t.paused, t.paused_since, t.held) for t in stats.topics] == [
        ("a", False, None, 0), ("b", True, 1700000000.125, 3), ("c", True, None, 0), ("d", True, None, 1)]
    for bad in ([b"a", 1, 0, 0, 0], [b"a", 1, 0, 0, 0, b""], [b"a", 1, 0, 0, 0, b"", 0],
                [b"a", 1, 0, 0, 0, b"", 0, b""], [b"a", 1, 0, 0, 0, b"", 0, *none, b""],
                [b"a", 1, 0, 0, 0, 7, 0, *none], [b"a", 1, 0, 0, 0, b"", -1, *none],
                [b"a", 1, 0, 0, 0, b"", b"1", *none]):
        with pytest.raises(ProtocolError):
            decode_stats(stats_reply(bad))


def test_per_topic_stats_read_each_topics_pause() -> None:
    op = stats_op(Keys(P, "topic"))
    scan = next(op)
    assert scan.commands == [("SSCAN", P + "topics", 0, "COUNT", 1000)]  # type: ignore[union-attr]
    counts = op.send([[b"0", [b"a", b"b", b"c", b"d"]]])
    commands = counts.commands  # type: ignore[union-attr]
    assert counts.tolerate is True  # type: ignore[union-attr]
    assert len(commands) == 4 * 6
    now = commands[5][3]
    assert commands[:6] == [("ZCARD", P + "{a}:pool"), ("LLEN", P + "{a}:ready"), ("ZCARD", P + "{a}:reserved"),
                            ("LLEN", P + "{a}:dead"), ("HMGET", P + "{a}:flow", "paused", "per_second", "burst"),
                            ("ZCOUNT", P + "{a}:pool", "-inf", now)]
    assert isinstance(now, str) and len(now.split(".")[1]) == 3  # the client's clock, ms
    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    replies = [3, 0, 0, 0, [None, None, None], 2,  # running: nothing held whatever is due
               3, 1, 0, 0, [b"1700000000.500", None, None], 2,
               1, 0, 0, 0, wrong, 1,  # a flow hash of the wrong type
               0, 0, 0, 0, [b"", None, None], 0]  # a `paused` field, empty: paused all the same
    with pytest.raises(StopIteration) as done:
        op.send(replies)
    stats: Stats = done.value.value
    assert [(t.topic, t.scheduled, t.ready, t.paused, t.paused_since, t.held) for t in stats.topics] == [
        ("a", 3, 0, False, None, 0), ("b", 3, 1, True, 1700000000.5, 2), ("c", 1, 0, True, None, 1),
        ("d", 0, 0, True, None, 0)]
    # Any other error is raised, as before.
    op = stats_op(Keys(P, "topic"))
    next(op)
    op.send([[b"0", [b"a"]]])
    with pytest.raises(redis.ResponseError):
        op.send([wrong, 0, 0, 0, [None, None, None], 0])
