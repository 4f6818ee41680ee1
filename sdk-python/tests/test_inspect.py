"""Job lookup, listings and per-topic numbers (issue 13), sync and asyncio,
against a real redis-server; moves run the server's move.lua (conftest)."""

from __future__ import annotations

from typing import Tuple

import pytest
import redis

from delayer import Delayer, InvalidArgument, Job
from delayer.aio import Delayer as AsyncDelayer
from delayer.inspect import JobInfo, Page, Stats

from conftest import move, run


def numbers(d: Delayer, topic: str) -> Tuple[int, int, object, int]:
    t = {s.topic: s for s in d.stats().topics}[topic]
    return t.scheduled, t.ready, t.reserved, t.dead


def test_one_job_through_its_whole_life(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        assert d.job("t", "a").state == "unknown"
        due = d.push("t", "a", 60, b"hello", max_attempts=3)
        info = d.job("t", "a")
        assert info == JobInfo("a", "scheduled", "t", 5, 0, 3, due, None, None, None, None)
        assert d.job("other", "a").state == "unknown"
        assert numbers(d, "t") == (1, 0, 0, 0)

        d.reschedule("a", 0)
        move(raw)
        assert (d.job("t", "a").state, d.job("t", "a").due) == ("ready", None)
        assert numbers(d, "t") == (0, 1, 0, 0)

        job = d.reserve("t", 30)
        assert job is not None
        info = d.job("t", "a")
        assert (info.state, info.attempts, info.deadline) == ("reserved", 1, job.deadline)
        assert numbers(d, "t") == (0, 0, 1, 0)

        assert d.bury(job, error="ValueError: no such order")
        info = d.job("t", "a")
        assert (info.state, info.dead_reason, info.last_error) == ("dead", "buried", "ValueError: no such order")
        assert info.dead_at is not None
        assert numbers(d, "t") == (0, 0, 0, 1)

        assert d.requeue_dead("t", ["a"]) == 1
        info = d.job("t", "a")
        assert (info.state, info.attempts, info.dead_reason) == ("scheduled", 0, None)
        assert numbers(d, "t") == (1, 0, 0, 0)


def test_malformed_and_bad_arguments(url: str, raw: "redis.Redis") -> None:
    raw.hset("delayer:job_bucket:h", "body", "x")
    raw.set("delayer:job_bucket:s", "x")
    with Delayer(url) as d:
        assert d.job("t", "h").state == "malformed"
        assert d.job("t", "s").state == "malformed"
        for bad in [lambda: d.job("", "a"), lambda: d.job("t", ""), lambda: d.list_ready("t", 0, 0),
                    lambda: d.list_scheduled("t", -1, 5), lambda: d.list_reserved("t", 0, 1001)]:
            with pytest.raises(InvalidArgument):
                bad()


def test_counts_follow_replace_remove_and_move(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("a", "1", 60)
        d.push("a", "2", 60)
        d.push("b", "2", 60)
        d.push_many([Job("c", f"c{i}", 0) for i in range(150)])
        stats = d.stats()
        assert isinstance(stats, Stats) and stats.scheduled_total == 152
        assert [(t.topic, t.scheduled) for t in stats.topics] == [("a", 1), ("b", 1), ("c", 150)]
        assert d.remove("1")
        assert "a" not in {t.topic for t in d.stats().topics}, "a topic with nothing left is not listed until moved"
        move(raw)
        assert numbers(d, "c") == (0, 150, 0, 0)
        assert d.remove("2")
        move(raw)
        assert raw.exists("delayer:scheduled_count") == 0, "an empty pool resets the counts"
        assert [t.topic for t in d.stats().topics] == ["c"], "topics moved stay known"


def test_listings_page_through_a_topic(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        for i in range(25):
            d.push("x", f"x{i:02}", 100 + i)
            d.push("y", f"y{i:02}", 100 + i)
        seen, cursor = [], 0
        while True:
            page = d.list_scheduled("x", cursor, 10)
            assert len(page.items) <= 10
            seen += page.items
            if page.next is None:
                break
            cursor = page.next
        assert [s.id for s in seen] == [f"x{i:02}" for i in range(25)]
        assert all(a.time <= b.time for a, b in zip(seen, seen[1:]))

        for i in range(5):
            raw.lpush("delayer:ready_queue:r", f"r{i}")
        assert d.list_ready("r", 0, 3) == Page(["r0", "r1", "r2"], 3)
        assert d.list_ready("r", 3, 3) == Page(["r3", "r4"], None)

        d.push("q", "q1", 0)
        d.push("q", "q2", 0)
        move(raw)
        first = d.reserve("q", 60)
        second = d.reserve("q", 30)
        assert first is not None and second is not None
        page = d.list_reserved("q")
        assert [(item.id, item.time) for item in page.items] == [(second.id, second.deadline), (first.id, first.deadline)]
        assert page.next is None


def test_the_async_client_sees_the_same(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with AsyncDelayer(url) as d:
            due = await d.push("t", "a", 60)
            info = await d.job("t", "a")
            assert (info.state, info.due) == ("scheduled", due)
            assert [i.id for i in (await d.list_scheduled("t")).items] == ["a"]
            assert (await d.list_ready("t")).items == []
            assert (await d.list_reserved("t")).items == []
            stats = await d.stats()
            assert (stats.scheduled_total, stats.topics[0].scheduled) == (1, 1)

    run(main)


def test_listing_positions_past_the_bound_are_refused(url: str) -> None:
    top = 2**53 - 1  # every SDK's, the CLI's and the HTTP API's bound
    with Delayer(url) as d:
        d.push("t", "a", 60)
        for past in (top + 1, 2**63, 2**64):
            for call in (d.list_scheduled, d.list_reserved, d.list_ready, d.dead_letters):
                with pytest.raises(InvalidArgument, match=str(top)):
                    call("t", past, 10)
        assert d.list_scheduled("t", top, 10).items == [] and d.dead_letters("t", top, 10) == []
        assert d.list_ready("t", top, 10).next is None
