"""Ids pushed again: a stale ready entry or reservation never carries the newer
job out early, and ``if_absent`` (docs/PROTOCOL.md; issue 10, items 2 and 3).

Sync and asyncio clients, against a real redis-server, with the server's own
move.lua making jobs due.
"""

from __future__ import annotations

import time
from typing import Optional

import pytest
import redis

from delayer import Delayer, IdTakenError, InvalidArgument, Job, Taken
from delayer import aio

from conftest import bucket, move_until, redis_now, run

POOL = "delayer:job_pool"
RESERVED = "delayer:reserved"




def ready(topic: str) -> str:
    return f"delayer:ready_queue:{topic}"


def push_1x(raw: "redis.Redis", topic: str, job_id: str, delay: int, body: bytes) -> None:
    """A Delayer 1.x push: HSET merges into the old bucket (its other fields stay)."""
    with raw.pipeline(transaction=True) as pipe:
        pipe.hset(bucket(job_id), mapping={"topic": topic, "body": body})
        pipe.expire(bucket(job_id), delay + 3600)
        pipe.zadd(POOL, {job_id: int(time.time()) + delay})
        pipe.execute()


def repush(d: Delayer, raw: "redis.Redis", how: str) -> None:
    """Push id X again, due in 100 s, by the SDK or as Delayer 1.x does."""
    if how == "sdk":
        d.push("t", "X", 100, b"second")
    else:
        push_1x(raw, "t", "X", 100, b"second")


def assert_second_job_waits(raw: "redis.Redis") -> None:
    assert raw.zscore(POOL, "X") is not None
    assert raw.hget(bucket("X"), "body") == b"second"


CONSUMERS = {
    "pop": lambda d: d.pop("t"),
    "bpop": lambda d: d.bpop("t", 0.3),
    "reserve": lambda d: d.reserve("t", 30),
    "breserve": lambda d: d.breserve("t", 30, 0.3),
}


@pytest.mark.parametrize("how", ["sdk", "1.x"])
@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_a_stale_ready_entry_does_not_carry_a_repushed_job_out(
    url: str, raw: "redis.Redis", consumer: str, how: str
) -> None:
    with Delayer(url) as d:
        d.push("t", "X", 0, b"first")
        move_until(raw, 1)  # X's first push is in the ready queue
        repush(d, raw, how)
        assert CONSUMERS[consumer](d) is None  # not due for 100 s
        assert raw.llen(ready("t")) == 0  # the stale entry is dropped
        assert_second_job_waits(raw)
        # the second job is delivered once it is due, and only then
        assert d.reschedule("X", 0) is not None
        move_until(raw, 1)
        got = CONSUMERS[consumer](d)
        assert got is not None and (got.id, got.body) == ("X", b"second")


def test_a_stale_reservation_is_not_held(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "X", 0, b"first")
        move_until(raw, 1)
        job = d.reserve("t", 30)
        assert job is not None
        push_1x(raw, "t", "X", 100, b"second")  # keeps the old receipt field
        assert d.ack(job) is False
        assert d.ack("X") is False
        assert d.touch(job, 60) is None
        assert d.release(job, 0) is False
        assert d.bury(job) is False
        assert_second_job_waits(raw)


def test_push_replaces_a_job_on_another_topic_by_default(url: str, raw: "redis.Redis") -> None:
    # In the classic layout ids are global across topics (documented).
    with Delayer(url) as d:
        d.push("close_order", "42", 100, b"close")
        d.push("sms", "42", 5, b"text")
    assert raw.hgetall(bucket("42")) == {b"topic": b"sms", b"body": b"text"}


def test_push_if_absent_writes_nothing_for_a_taken_id(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        due = d.push("close_order", "42", 100, b"close")
        before = raw.hgetall(bucket("42"))
        with pytest.raises(IdTakenError) as info:
            d.push("sms", "42", 5, b"text", if_absent=True)
        assert info.value.taken == [Taken("42", "close_order", pytest.approx(due, abs=0.0005))]
        assert info.value.due == [None]
        assert "42" in str(info.value) and "close_order" in str(info.value)
        assert raw.hgetall(bucket("42")) == before
        assert raw.zscore(POOL, "42") == pytest.approx(due, abs=0.0005)
        # a free id is pushed as usual
        assert d.push("sms", "43", 5, b"text", if_absent=True) > due - 100

        # a job that no longer waits (ready): taken, with no due time
        d.push("t", "r", 0)
        move_until(raw, 1)
        with pytest.raises(IdTakenError) as info:
            d.push("t", "r", 0, if_absent=True)
        assert info.value.taken == [Taken("r", "t", None)]
        with pytest.raises(InvalidArgument):
            d.push("t", "y", 0, if_absent="yes")  # type: ignore[arg-type]


def test_push_many_if_absent_writes_the_free_ids_and_names_the_taken(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("close_order", "taken-1", 100, b"keep")
        d.push("close_order", "taken-150", 200, b"keep")
        jobs = [Job("t", "taken-1" if i == 1 else "taken-150" if i == 150 else f"j{i}", 10, b"new") for i in range(250)]
        now = redis_now(raw)
        with pytest.raises(IdTakenError) as info:
            d.push_many(jobs, if_absent=True)
        e = info.value
        assert [(t.id, t.topic) for t in e.taken] == [("taken-1", "close_order"), ("taken-150", "close_order")]
        assert e.taken[0].due is not None and e.taken[0].due > now + 99
        assert len(e.due) == 250 and e.due[1] is None and e.due[150] is None
        assert all(x is not None and now + 9 < x < now + 12 for i, x in enumerate(e.due) if i not in (1, 150))
        assert raw.zcard(POOL) == 250
        assert raw.hget(bucket("taken-1"), "body") == b"keep"
        assert raw.hget(bucket("j249"), "body") == b"new"
        # the default replaces
        d.push_many([Job("sms", "taken-1", 1, b"replaced")])
        assert raw.hgetall(bucket("taken-1")) == {b"topic": b"sms", b"body": b"replaced"}


ASYNC_CONSUMERS = {
    "pop": lambda d: d.pop("t"),
    "bpop": lambda d: d.bpop("t", 0.3),
    "reserve": lambda d: d.reserve("t", 30),
    "breserve": lambda d: d.breserve("t", 30, 0.3),
}


@pytest.mark.parametrize("consumer", sorted(ASYNC_CONSUMERS))
def test_async_a_stale_ready_entry_does_not_carry_a_repushed_job_out(
    url: str, raw: "redis.Redis", consumer: str
) -> None:
    async def main() -> Optional[str]:
        async with aio.Delayer(url) as d:
            await d.push("t", "X", 0, b"first")
            move_until(raw, 1)
            await d.push("t", "X", 100, b"second")
            assert await ASYNC_CONSUMERS[consumer](d) is None
            assert_second_job_waits(raw)
            assert await d.reschedule("X", 0) is not None
            move_until(raw, 1)
            got = await ASYNC_CONSUMERS[consumer](d)
            return None if got is None else got.id

    assert run(main) == "X"


def test_async_if_absent(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with aio.Delayer(url) as d:
            due = await d.push("close_order", "42", 100, b"close")
            with pytest.raises(IdTakenError) as info:
                await d.push("sms", "42", 5, b"text", if_absent=True)
            assert info.value.taken == [Taken("42", "close_order", pytest.approx(due, abs=0.0005))]
            with pytest.raises(IdTakenError) as many:
                await d.push_many([Job("t", "a", 1), Job("t", "42", 1)], if_absent=True)
            assert [t.id for t in many.value.taken] == ["42"]
            assert many.value.due[0] is not None and many.value.due[1] is None

    run(main)
    assert raw.hget(bucket("42"), "topic") == b"close_order"
    assert raw.zscore(POOL, "a") is not None
