"""The client operations a Worker is built on (issue 14): ``reserve_many``
(ack some, reserve up to n, in one reserve.lua call) and the error text of
``release`` / ``bury``, kept on the job as ``last_error``; sync and asyncio."""

from __future__ import annotations

from typing import List

import pytest
import redis

import delayer.aio as aio
from delayer import Delayer, InvalidArgument, ReservedMessage

from conftest import bucket, move_until, run


def ready(d: Delayer, raw: "redis.Redis", ids: List[str], topic: str = "t") -> None:
    for i in ids:
        d.push(topic, i, 0, f"body-{i}")
    move_until(raw, len(ids))


def test_reserve_many_reserves_up_to_n_in_ready_order(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a", "b", "c"])
        acked, jobs = d.reserve_many("t", 30, 2)
        assert acked == []
        assert [j.id for j in jobs] == ["a", "b"]
        assert all(isinstance(j, ReservedMessage) and j.attempts == 1 and j.body == f"body-{j.id}".encode()
                   for j in jobs)
        assert raw.zcard("delayer:reserved") == 2
        acked, more = d.reserve_many("t", 30, 10)
        assert [j.id for j in more] == ["c"]
        assert d.reserve_many("t", 30, 10) == ([], [])


def test_reserve_many_acks_first_one_result_per_ack(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a", "b", "c", "d"])
        _, jobs = d.reserve_many("t", 30, 3)
        a, b, c = jobs
        # a ReservedMessage, an (id, receipt) pair, an id alone, a wrong receipt, an unknown id
        acked, nxt = d.reserve_many("t", 30, 5, [a, (b.id, b.receipt), c.id, ("d", "999"), "nope"])
        assert acked == [True, True, True, False, False]
        assert [j.id for j in nxt] == ["d"]  # "d" was ready, not held, when its ack came
        assert not raw.exists(bucket("a"), bucket("b"), bucket("c"))
        assert raw.zrange("delayer:reserved", 0, -1) == [b"d"]
        # n = 0 only acks; an ack sent twice finds nothing the second time
        assert d.reserve_many("t", 30, 0, [nxt[0], nxt[0]]) == ([True, False], [])
        assert raw.zcard("delayer:reserved") == 0


def test_reserve_many_takes_an_id_queued_twice_once(url: str, raw: "redis.Redis") -> None:
    # A batch enters the reserved set after all its checks: an id queued twice
    # (a stale second entry) must still be handed out once, as reserve would.
    with Delayer(url) as d:
        ready(d, raw, ["a", "b"])
        raw.lpush("delayer:ready_queue:t", "a")
        _, jobs = d.reserve_many("t", 30, 10)
        assert sorted(j.id for j in jobs) == ["a", "b"]
        assert raw.llen("delayer:ready_queue:t") == 0
        assert len({j.receipt for j in jobs}) == 2


def test_reserve_many_meeting_a_wrong_type_key_loses_no_id(url: str, raw: "redis.Redis") -> None:
    # The reserved set is not a ZSET: the popped ids go back, in order.
    with Delayer(url) as d:
        ready(d, raw, ["a", "b", "c"])
        raw.set("delayer:reserved", "not a zset")
        with pytest.raises(Exception):
            d.reserve_many("t", 30, 10)
        assert raw.lrange("delayer:ready_queue:t", 0, -1) == [b"c", b"b", b"a"]
        raw.delete("delayer:reserved")
        _, jobs = d.reserve_many("t", 30, 10)
        assert [j.id for j in jobs] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "n, acks, message",
    [
        (-1, (), "n"),
        (1001, (), "n"),
        (True, (), "n"),
        (1, "abc", "acks must be an iterable"),
        (1, 5, "acks must be an iterable"),
        (1, [("a", "1", "x")], "acks[0]"),
        (1, [""], "acks[0]"),
        (1, [("a", "")], "acks[0]"),
        (1, ["x"] * 1001, "at most 1000"),
    ],
)
def test_reserve_many_checks_its_arguments_before_sending(
    url: str, raw: "redis.Redis", n: object, acks: object, message: str
) -> None:
    with Delayer(url) as d:
        with pytest.raises(InvalidArgument, match=message.replace("[", r"\[")):
            d.reserve_many("t", 30, n, acks)  # type: ignore[arg-type]
    assert raw.dbsize() == 0


def test_release_and_bury_keep_the_error_text(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a", "b", "c"])
        _, (a, b, c) = d.reserve_many("t", 30, 3)
        assert d.release(a, error="ValueError: bad order")
        assert raw.hget(bucket("a"), "last_error") == b"ValueError: bad order"
        assert d.bury(b, error="KeyError: 'sku'")
        assert raw.hget(bucket("b"), "last_error") == b"KeyError: 'sku'"
        assert d.dead_letters("t")[0].id == "b"
        assert d.release(c)  # no error: nothing recorded
        assert raw.hget(bucket("c"), "last_error") is None


def test_a_long_error_text_is_cut_on_a_character_boundary(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a"])
        job = d.reserve("t", 30)
        assert job is not None
        assert d.release(job, error="E: " + "é" * 1000)
        kept = raw.hget(bucket("a"), "last_error")
        assert kept is not None and len(kept) <= 1000
        assert kept.decode("utf-8") == "E: " + "é" * ((1000 - 3) // 2)


@pytest.mark.parametrize("error, message", [(5, "error must be a str"), ("\ud800", "UTF-8")])
def test_a_bad_error_text_is_refused(url: str, raw: "redis.Redis", error: object, message: str) -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a"])
        job = d.reserve("t", 30)
        assert job is not None
        with pytest.raises(InvalidArgument, match=message):
            d.release(job, error=error)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=message):
            d.bury(job, error=error)  # type: ignore[arg-type]
        assert raw.zscore("delayer:reserved", "a") is not None  # still held


def test_async_reserve_many_release_and_bury(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        ready(d, raw, ["a", "b", "c"])

    async def body() -> None:
        async with aio.Delayer(url) as d:
            acked, jobs = await d.reserve_many("t", 30, 3)
            assert acked == [] and [j.id for j in jobs] == ["a", "b", "c"]
            assert await d.release(jobs[1], delay=60, error="RuntimeError: x")
            assert await d.bury(jobs[2], error="TypeError: y")
            assert await d.reserve_many("t", 30, 1, [jobs[0], jobs[1]]) == ([True, False], [])

    run(body)
    assert not raw.exists(bucket("a"))
    assert raw.hget(bucket("b"), "last_error") == b"RuntimeError: x"
    assert raw.hget(bucket("c"), "last_error") == b"TypeError: y"
    assert raw.zscore("delayer:job_pool", "b") is not None
    assert raw.lrange("delayer:dead:t", 0, -1) == [b"c"]
