"""The asyncio client and Worker on the per-topic layout (``layout="topic"``,
issue 12): the sync tests' checks (test_topic_layout.py) on
``delayer.aio``, whose operations are the same generators driven by other I/O,
against a real redis-server with the server's scripts played by topickit."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, List

import pytest
import redis

import delayer.aio as aio
from delayer import Backoff, IdTakenError, InvalidArgument, Job

from conftest import redis_now, run
from topickit import WITHIN, TopicServer, WakeListener, key, move_until
from workerkit import Recorder

P = "shop:"


def k(topic: str, kind: str) -> str:
    return key(P, topic, kind)


def with_client(url: str, body: Callable[[aio.Delayer], Awaitable[None]]) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout="topic") as d:
            await body(d)

    run(main)


async def until(what: str, check: Callable[[], bool], within: float = WITHIN) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        await asyncio.sleep(0.01)


def test_push_writes_the_topics_keys_and_announces(url: str, raw: "redis.Redis", wake: WakeListener) -> None:
    async def body(d: aio.Delayer) -> None:
        before = redis_now(raw)
        first = await d.push("mail", "o-1", 100, b"hello")
        assert before + 99 < first < redis_now(raw) + 101
        assert raw.zscore(k("mail", "pool"), "o-1") == first
        assert raw.hgetall(k("mail", "job:o-1")) == {b"topic": b"mail", b"body": b"hello", b"due": b"%.3f" % first}
        assert wake.next() == b"%.3f mail" % first
        await d.push("mail", "o-2", 200)  # later than the pool's earliest: no message
        third = await d.push("mail", "o-3", 50)
        assert wake.next() == b"%.3f mail" % third  # had o-2 published, its message would come first
        assert not raw.exists(P + "due", P + "topics")  # the server's index
        # ids per topic
        await d.push("sms", "o-1", 100, b"other")
        assert raw.hget(k("mail", "job:o-1"), "body") == b"hello"
        with pytest.raises(IdTakenError):
            await d.push("sms", "o-1", 1, if_absent=True)

    with_client(url, body)
    assert not raw.exists("shop:job_pool", "shop:scheduled_count")


def test_push_many_across_topics_in_order(url: str, raw: "redis.Redis") -> None:
    async def body(d: aio.Delayer) -> None:
        jobs = [Job("ab"[i % 2], f"j{i}", 10 + i) for i in range(230)]
        dues = await d.push_many(jobs)
        assert dues == sorted(dues) and len(dues) == 230
        for job, due in zip(jobs, dues):
            assert raw.zscore(k(job.topic, "pool"), job.id) == due
        assert not raw.exists(P + "due", P + "topics")  # the server's index

    with_client(url, body)


def test_every_operation(url: str, raw: "redis.Redis", wake: WakeListener) -> None:
    async def body(d: aio.Delayer) -> None:
        # pop / bpop
        assert await d.pop("t") is None and await d.bpop("t", 0.05) is None
        await d.push("t", "p1", 0, b"one")
        await d.push("t", "p2", 0, b"two")
        move_until(raw, "t", 2, P)
        m = await d.pop("t")
        assert m is not None and (m.id, m.topic, m.body) == ("p1", "t", b"one")
        m = await d.bpop("t", 5)
        assert m is not None and m.id == "p2"
        # remove / reschedule
        await d.push("t", "w", 100)
        with pytest.raises(InvalidArgument, match=r"remove\(id, topic=\.\.\.\)"):
            await d.remove("w")
        with pytest.raises(InvalidArgument, match=r"reschedule\(id, delay, topic=\.\.\.\)"):
            await d.reschedule("w", 1)
        due = await d.reschedule("w", 60, topic="t")
        assert due is not None and raw.zscore(k("t", "pool"), "w") == due
        assert await d.remove("w", topic="t") is True and await d.remove("w", topic="t") is False
        # reserve / breserve / touch / ack / release / bury
        for i in range(4):
            await d.push("t", f"r{i}", 0, max_attempts=5)
        move_until(raw, "t", 4, P)
        while wake.next(0.2) is not None:
            pass  # the pushes' messages
        a = await d.reserve("t", 30)
        assert a is not None and raw.zscore(k("t", "reserved"), a.id) == round(a.deadline * 1000)
        assert wake.next() == b"%.3f t" % a.deadline
        b = await d.breserve("t", 30, 5)
        assert b is not None
        with pytest.raises(InvalidArgument, match=r"touch\(id, ttr, receipt, topic=\.\.\.\)"):
            await d.touch(a.id, 10)
        assert await d.touch(a.id, 60, a.receipt, topic="t") is not None
        with pytest.raises(InvalidArgument, match=r"ack\(id, receipt, topic=\.\.\.\)"):
            await d.ack(a.id)
        assert await d.ack(a.id, a.receipt, topic="t") is True
        assert await d.release(b, 5, error="boom") is True
        assert raw.zscore(k("t", "pool"), b.id) is not None
        acked, jobs = await d.reserve_many("t", 30, 5)
        assert acked == [] and len(jobs) == 2
        assert await d.bury(jobs[0].id, jobs[0].receipt, topic="t") is True
        assert await d.release(jobs[1].id, None, jobs[1].receipt, topic="t") is True
        # dead letters
        dead = await d.dead_letters("t")
        assert [(x.id, x.reason) for x in dead] == [(jobs[0].id, "buried")]
        assert await d.requeue_dead("t") == 1 and raw.zscore(k("t", "pool"), jobs[0].id) is not None
        move_until(raw, "t", 1, P)
        again = await d.reserve("t", 30)
        assert again is not None and await d.bury(again) is True
        assert await d.purge_dead("t") == 1
        # lookups, listings, stats
        info = await d.job("t", b.id)
        assert info.state == "scheduled" and info.last_error == "boom"
        assert [x.id for x in (await d.list_scheduled("t")).items] == sorted(
            [b.id, jobs[1].id], key=lambda i: raw.zscore(k("t", "pool"), i) or 0)
        assert (await d.list_reserved("t")).items == [] and (await d.list_ready("t")).items == []
        raw.sadd(P + "topics", "t")  # as the server records the topics announced
        stats = await d.stats()
        assert [(s.topic, s.scheduled, s.ready, s.reserved, s.dead) for s in stats.topics] == [("t", 2, 0, 0, 0)]
        # refusals
        with pytest.raises(InvalidArgument, match='topic "a{b}" may not contain "{" or "}" in the per-topic layout'):
            await d.push("a{b}", "1", 0)
        with pytest.raises(InvalidArgument, match='topic "}" may not contain'):
            await d.job("}", "1")

    with_client(url, body)


def test_reserve_many_acks_of_several_topics(url: str, raw: "redis.Redis") -> None:
    async def body(d: aio.Delayer) -> None:
        for t in ("a", "b"):
            await d.push_many([Job(t, f"{t}{i}", 0) for i in range(2)])
            move_until(raw, t, 2, P)
        _, ja = await d.reserve_many("a", 30, 2)
        _, jb = await d.reserve_many("b", 30, 1)
        acked, more = await d.reserve_many("b", 30, 1, [ja[0], jb[0], ja[1]])
        assert acked == [True, True, True] and [j.id for j in more] == ["b1"]
        assert await d.ack(more[0]) is True
        assert not raw.keys("*reserved*") and not raw.keys(P + "{*}:job:*")

    with_client(url, body)


def test_from_config_and_constructor(url: str, raw: "redis.Redis", tmp_path: Path) -> None:
    port = raw.connection_pool.connection_kwargs["port"]
    path = tmp_path / "delayer.conf"
    path.write_text(f"[delayer]\nlayout = topic\nkey_prefix = cfg:\n[redis]\nport = {port}\n")

    async def main() -> None:
        d = aio.Delayer.from_config(path)
        try:
            assert (d.keys.prefix, d.keys.layout) == ("cfg:", "topic")
            await d.push("t", "1", 60)
        finally:
            await d.close()
        with pytest.raises(InvalidArgument, match=r'prefix "\{x\}" may not contain'):
            aio.Delayer(url, "{x}", layout="topic")

    run(main)
    assert raw.exists("cfg:{t}:pool", "cfg:{t}:job:1") == 2 and not raw.exists("cfg:due")


def test_a_worker_runs_jobs_of_several_topics(url: str, raw: "redis.Redis") -> None:
    server = TopicServer(url, P)
    hooks = Recorder()
    seen: List[Any] = []

    async def body(d: aio.Delayer) -> None:
        w = aio.Worker(d, concurrency=4, hooks=hooks)

        async def handle(job: aio.Delivery) -> None:
            seen.append((job.topic, job.id, job.attempts))
            if job.id == "flaky" and job.attempts == 1:
                raise ValueError("first time")

        w.handle("a", handle)
        w.handle("b", handle)
        with pytest.raises(InvalidArgument, match="per-topic layout"):
            w.handle("c{d}", handle)
        await d.push_many([Job(t, str(i), 0) for t in "ab" for i in range(15)])
        await d.push("a", "flaky", 0, backoff=Backoff.fixed(0.01))
        task = asyncio.ensure_future(w.run(signals=False))
        await until("every ack", lambda: len(hooks.names("acked")) == 31)
        w.stop()
        await asyncio.wait_for(task, WITHIN)

    try:
        with_client(url, body)
    finally:
        server.close()
    assert sorted((t, i) for t, i, n in seen if n == 1) == sorted(
        [(t, str(i)) for t in "ab" for i in range(15)] + [("a", "flaky")])
    assert ("a", "flaky", 2) in seen and hooks.names("lost") == []
    assert not raw.keys(P + "{*}:job:*") and not raw.keys(P + "{*}:reserved")
