"""Any id or topic a Delayer 1.x client could write works on every call.

1.x refused only empty ids and topics, so jobs on topics like ``close order``,
and ids with spaces, braces, control characters or hundreds of bytes, exist in
the field; the classic layout puts them in key names, where Redis takes any
bytes. Only the empty name (and a ``str`` that is not text) is refused.
"""

from __future__ import annotations

import asyncio
from typing import List

import pytest
import redis

from delayer import Delayer, InvalidArgument, Job
from delayer.aio import Delayer as AsyncDelayer

from conftest import move_until, redis_now

TOPIC = "close order"
ODD_IDS: List[str] = [
    "order 42",
    "{tag}",
    "a}b{",
    "订单 一",
    "tab\there\nnewline",
    " ",
    "42",
    "\x7f\x00",
    "long " + "x" * 300,
]


def push_1x(raw: "redis.Redis", topic: str, job_id: str, delay: int, body: bytes) -> None:
    """As the 1.x PHP client: MULTI; HMSET; EXPIRE; ZADD whole seconds; EXEC."""
    bucket = "delayer:job_bucket:" + job_id
    with raw.pipeline(transaction=True) as pipe:
        pipe.execute_command("HMSET", bucket, "topic", topic, "body", body)
        pipe.execute_command("EXPIRE", bucket, delay + 604800)
        pipe.execute_command("ZADD", "delayer:job_pool", int(redis_now(raw)) + delay, job_id)
        pipe.execute()


def test_a_1x_job_with_an_odd_topic_and_id_is_popped_and_removed(url: str, raw: "redis.Redis") -> None:
    for job_id in ODD_IDS:
        push_1x(raw, TOPIC, job_id, 0, b"body of " + job_id.encode())
    move_until(raw, len(ODD_IDS))
    with Delayer(url) as d:
        got = []
        for _ in ODD_IDS[:-1]:
            m = d.pop(TOPIC)
            assert m is not None
            got.append(m)
        last = d.bpop(TOPIC, 5)
        assert last is not None
        got.append(last)
        assert d.pop(TOPIC) is None
        # Equal whole-second scores leave the pop order to Redis: compare as sets.
        assert sorted((m.id, m.topic, m.body) for m in got) == sorted((i, TOPIC, b"body of " + i.encode()) for i in ODD_IDS)
        for job_id in ODD_IDS:
            push_1x(raw, TOPIC, job_id, 60, b"waiting")
            assert d.remove(job_id), job_id
    assert set(raw.keys("*")) == {b"delayer:topics"}  # move.lua records the topics it moved (PROTOCOL.md, "Inspecting jobs")


def test_odd_names_are_pushed_reserved_rescheduled_and_dead_lettered(url: str, raw: "redis.Redis") -> None:
    first, rest = ODD_IDS[0], ODD_IDS[1:]
    with Delayer(url) as d:
        d.push(TOPIC, first, 60, b"b")
        d.push_many([Job(TOPIC, i, 60) for i in rest])
        for job_id in ODD_IDS:
            assert raw.hget("delayer:job_bucket:" + job_id, "topic") == TOPIC.encode()
        for job_id in ODD_IDS:  # one at a time, so each call meets this job
            assert d.reschedule(job_id, 0) is not None, job_id
            move_until(raw, 1)
            job = d.reserve(TOPIC, 60)
            assert job is not None and (job.id, job.topic) == (job_id, TOPIC)
            assert d.touch(job, 60) is not None
            assert d.release(job_id, None, job.receipt)
            assert d.reschedule(job_id, 0) is not None
            move_until(raw, 1)
            again = d.breserve(TOPIC, 60, 5)
            assert again is not None and again.id == job_id
            if job_id == first:
                assert d.ack(job_id)
            else:
                assert d.bury(again)
        assert sorted(letter.id for letter in d.dead_letters(TOPIC, 0, 100)) == sorted(rest)
        half = len(rest) // 2
        assert d.requeue_dead(TOPIC, rest[:half]) == half
        assert d.purge_dead(TOPIC, rest[half:]) == len(rest) - half
        assert d.dead_letters(TOPIC) == []
        for job_id in rest[:half]:
            assert raw.zscore("delayer:job_pool", job_id) is not None, job_id


def test_the_async_client_takes_odd_names_too(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with AsyncDelayer(url) as d:
            for job_id in ODD_IDS:
                await d.push(TOPIC, job_id, 0, job_id)
            move_until(raw, len(ODD_IDS))
            got = [await d.pop(TOPIC) for _ in ODD_IDS]
            assert sorted(m.id if m else "" for m in got) == sorted(ODD_IDS)
            await d.push(TOPIC, ODD_IDS[0], 60)
            assert await d.remove(ODD_IDS[0])

    asyncio.run(main())
    assert set(raw.keys("*")) == {b"delayer:topics"}  # move.lua records the topics it moved (PROTOCOL.md, "Inspecting jobs")


@pytest.mark.parametrize("bad", ["", "a\ud800", b"bytes", 42, None])
def test_only_an_empty_or_non_text_name_is_refused(url: str, raw: "redis.Redis", bad: object) -> None:
    with Delayer(url) as d:
        for call in (
            lambda: d.push(TOPIC, bad, 0),  # type: ignore[arg-type]
            lambda: d.push(bad, "id", 0),  # type: ignore[arg-type]
            lambda: d.pop(bad),  # type: ignore[arg-type]
            lambda: d.remove(bad),  # type: ignore[arg-type]
            lambda: d.reserve(bad, 1),  # type: ignore[arg-type]
            lambda: d.purge_dead(TOPIC, ["ok", bad]),  # type: ignore[list-item]
        ):
            with pytest.raises(InvalidArgument):
                call()
    assert raw.dbsize() == 0
