"""The asyncio client's at-least-once mode, against the same real redis-server
(the semantics are tested in depth on the sync client, test_reliable.py; the
two share every argument, script and reply parser)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Coroutine, List

import pytest
import redis
import redis.asyncio as aioredis

from delayer import Backoff, InvalidArgument, Job, ProtocolError
from delayer.aio import Delayer

from conftest import aclose, bucket, move_until, redis_now, reserved_deadline, run

POOL = "delayer:job_pool"
RESERVED = "delayer:reserved"




def test_reserve_ack_release_and_backoff(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            await d.push("t", "j", 0, b"x", max_attempts=3, backoff=Backoff.exponential(2, 3))
            move_until(raw, 1)
            before = redis_now(raw)
            job = await d.reserve("t", 20)
            assert job is not None
            assert (job.id, job.topic, job.body, job.attempts, job.max_attempts) == ("j", "t", b"x", 1, 3)
            assert before + 20 - 0.002 <= job.deadline <= redis_now(raw) + 20 + 0.002
            assert abs((reserved_deadline(raw, "j") or 0) - job.deadline) < 0.0005
            assert raw.pttl(bucket("j")) == -1
            assert raw.llen("delayer:ready_queue:t") == 0
            assert await d.reserve("t", 20) is None

            assert await d.ack("j", "wrong") is False
            now = redis_now(raw)
            assert await d.release(job) is True  # backoff: 2 s on the first failure
            score = raw.zscore(POOL, "j")
            assert score is not None and now + 2 - 0.002 <= score <= now + 2.5
            assert await d.release(job) is False

            assert await d.reschedule("j", 0) is not None
            move_until(raw, 1)
            second = await d.reserve("t", 20)
            assert second is not None and second.attempts == 2 and second.receipt != job.receipt
            now = redis_now(raw)
            assert await d.release(second.id, receipt=second.receipt) is True  # 4 s, capped at 3
            score = raw.zscore(POOL, "j")
            assert score is not None and now + 3 - 0.002 <= score <= now + 3.5

            assert await d.reschedule("j", 0) is not None
            move_until(raw, 1)
            third = await d.reserve("t", 20)
            assert third is not None and third.is_last_attempt
            assert await d.ack(job) is False  # an old reservation
            assert await d.ack(third) is True
            assert await d.ack(third) is False
            assert raw.exists(bucket("j")) == 0 and raw.zcard(RESERVED) == 0

    run(main)


def test_touch_extends_the_held_reservation(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            await d.push("t", "a", 0)
            move_until(raw, 1)
            job = await d.reserve("t", 5)
            assert job is not None
            before = redis_now(raw)
            deadline = await d.touch(job, 600)
            stored = reserved_deadline(raw, "a")
            assert deadline is not None and stored is not None and abs(deadline - stored) < 0.002
            assert abs(stored - (before + 600)) < 0.5
            shorter = await d.touch("a", 10)
            assert shorter is not None and shorter < deadline
            assert raw.hget(bucket("a"), "attempts") == b"1"
            assert await d.touch("a", 1, receipt="other") is None
            assert await d.touch("unknown", 1) is None
            with pytest.raises(InvalidArgument):
                await d.touch("a", 0)
            assert await d.ack(job) is True
            assert await d.touch(job, 1) is None
            assert raw.zcard(RESERVED) == 0

    run(main)


def test_dead_letters_requeue_and_purge(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            await d.push_many([Job("t", f"j{i}", 0, str(i), max_attempts=1) for i in range(4)])
            move_until(raw, 4)
            jobs = [await d.reserve("t", 20) for _ in range(4)]
            assert [j.id for j in jobs if j] == ["j0", "j1", "j2", "j3"]
            assert jobs[0] is not None and await d.release(jobs[0], 5) is True  # out of attempts
            for j in jobs[1:]:
                assert j is not None and await d.bury(j) is True
            letters = await d.dead_letters("t")
            assert [(x.id, x.reason, x.attempts, x.body) for x in letters] == [
                ("j3", "buried", 1, b"3"),
                ("j2", "buried", 1, b"2"),
                ("j1", "buried", 1, b"1"),
                ("j0", "max_attempts", 1, b"0"),
            ]
            assert [x.id for x in await d.dead_letters("t", 1, 2)] == ["j2", "j1"]
            assert await d.requeue_dead("t", ["j0", "nope"]) == 1
            assert raw.hget(bucket("j0"), "attempts") == b"0"
            assert raw.zscore(POOL, "j0") is not None
            assert await d.purge_dead("t", ["j3"]) == 1
            assert raw.exists(bucket("j3")) == 0
            assert await d.requeue_dead("t", []) == 0
            assert await d.requeue_dead("t") == 2
            assert await d.purge_dead("t") == 0
            assert raw.exists("delayer:dead:t") == 0
            assert raw.zcard(POOL) == 3

    run(main)


def test_reschedule(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            await d.push("t", "j", 100, b"", 50)
            now = redis_now(raw)
            due = await d.reschedule("j", 10)
            assert due is not None and now + 10 - 0.002 <= due <= now + 10.5
            assert abs((raw.zscore(POOL, "j") or 0) - due) < 0.0005
            assert 59_000 < raw.pttl(bucket("j")) <= 60_005  # within the clocks' millisecond
            assert await d.reschedule("unknown", 1) is None

    run(main)


def test_breserve_waits_wakes_and_times_out(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        other = aioredis.Redis.from_url(url)

        async def producer() -> None:
            deadline = time.monotonic() + 5
            while int((await other.info("clients"))["blocked_clients"]) < 1:  # breserve is waiting
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            await other.hset("delayer:job_bucket:late", mapping={"topic": "t", "body": "b"})
            await other.lpush("delayer:ready_queue:t", "ghost", "late")

        async with Delayer(url) as d:
            start = time.monotonic()
            task = asyncio.ensure_future(producer())
            job = await d.breserve("t", 10, 5)
            await task
            assert job is not None and (job.id, job.body, job.attempts) == ("late", b"b", 1)
            assert time.monotonic() - start < 4
            # the ghost (no bucket) is dropped, then the wait times out
            start = time.monotonic()
            assert await d.breserve("t", 10, 0.2) is None
            assert time.monotonic() - start >= 0.2
            assert raw.llen("delayer:ready_queue:t") == 0

            # a failing reserve.lua leaves the id where it was
            await d.push("t", "keep", 0)
            move_until(raw, 1)
            raw.delete("delayer:receipt_seq")
            raw.rpush("delayer:receipt_seq", "not a counter")
            with pytest.raises(ProtocolError):
                await d.breserve("t", 10, 1)
            assert raw.lrange("delayer:ready_queue:t", 0, -1) == [b"keep"]
        await aclose(other)

    run(main)


def test_validation_touches_nothing(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            raw.config_resetstat()
            bad: List[Callable[[], Coroutine[Any, Any, Any]]] = [
                lambda: d.reserve("t", 0),
                lambda: d.reserve("t", -1),
                lambda: d.breserve("t", 1, -1),
                lambda: d.push("t", "j", 0, max_attempts=-1),
                lambda: d.push("t", "j", 0, max_attempts=1_000_001),
                lambda: d.push("t", "j", 0, max_attempts=True),
                lambda: d.ack(""),
                lambda: d.release("j", -1),
                lambda: d.bury("j", 5),  # type: ignore[arg-type]
                lambda: d.reschedule("j", -1),
                lambda: d.dead_letters("t", 0, 0),
                lambda: d.dead_letters("t", 0, 1001),
                lambda: d.requeue_dead("t", "j"),
                lambda: d.purge_dead("t", ["j", ""]),
            ]
            for call in bad:
                with pytest.raises(InvalidArgument):
                    await call()
            stats = raw.info("commandstats")
            assert not any(k in stats for k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_blmove"))

    run(main)
    assert raw.dbsize() == 0
