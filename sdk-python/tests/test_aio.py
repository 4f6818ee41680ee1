"""The asyncio client: the key cases, against the same real redis-server."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Awaitable, Callable

import pytest
import redis
import redis.asyncio as aioredis

from delayer import ConnectionFailed, InvalidArgument, Job, Message
from delayer.aio import Delayer

from conftest import RedisServer, aclose, free_port, move, move_until, redis_now, run, wait_until_past

POOL = "delayer:job_pool"



def test_push_layout_and_pop(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            due = await d.push("mail", "a-1", 10, b"hello", 100)
            assert raw.hgetall("delayer:job_bucket:a-1") == {b"topic": b"mail", b"body": b"hello"}
            assert 109_000 < raw.pttl("delayer:job_bucket:a-1") <= 110_000
            assert abs((raw.zscore(POOL, "a-1") or 0) - due) < 0.0005
            assert abs(due - (redis_now(raw) + 10)) < 1
            assert await d.pop("mail") is None

    run(main)


def test_first_due_first_out_and_skip_gone(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            await d.push("t", "second", 0.08, b"2")
            await d.push("t", "first", 0.04, b"1")
            await d.push("t", "gone", 0.1)
            last = await d.push("t", "third", 0.12, bytes(range(256)))
            wait_until_past(raw, last)
            move_until(raw, 4)
            assert await d.remove("gone") is True
            assert await d.pop("t") == Message("first", "t", b"1")
            assert await d.pop("t") == Message("second", "t", b"2")
            assert await d.pop("t") == Message("third", "t", bytes(range(256)))
            assert await d.pop("t") is None

    run(main)


def test_bpop_waits_for_a_concurrent_push_and_times_out(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        other = aioredis.Redis.from_url(url)

        async def producer() -> None:
            await asyncio.sleep(0.1)
            await other.hset("delayer:job_bucket:late", mapping={"topic": "t", "body": "b"})
            await other.lpush("delayer:ready_queue:t", "ghost", "late")

        async with Delayer(url) as d:
            start = time.monotonic()
            task = asyncio.ensure_future(producer())
            msg = await d.bpop("t", 5)
            await task
            assert msg == Message("late", "t", b"b")
            assert time.monotonic() - start < 4
            # the ghost id (no bucket) is skipped, then the wait times out
            start = time.monotonic()
            assert await d.bpop("t", 0.2) is None
            assert time.monotonic() - start >= 0.2
        await aclose(other)

    run(main)
    assert raw.dbsize() == 0


def test_remove_push_many_and_big_bodies(url: str, raw: "redis.Redis") -> None:
    big = os.urandom(1024 * 1024)

    async def main() -> None:
        async with Delayer(url) as d:
            due = await d.push("t", "cancel", 0.05)
            assert await d.remove("cancel") is True
            assert await d.remove("cancel") is False
            wait_until_past(raw, due)
            assert move(raw)[0] == 0
            dues = await d.push_many([Job("t", f"j{i}", 0, str(i)) for i in range(1200)] + [Job("t", "big", 0, big)])
            assert len(dues) == 1201
            raw.script_flush()
            move_until(raw, 1201)
            got = [await d.pop("t") for _ in range(1201)]
            by_id = {m.id: m for m in got if m}
            assert len(by_id) == 1201
            assert by_id["big"].body == big
            assert by_id["j7"].text == "7"

    run(main)


def test_push_many_across_topics_and_after_script_flush(url: str, raw: "redis.Redis") -> None:
    topics = ("mail", "sms", "push")
    jobs = [Job(topics[i % 3], f"a-{i}", i % 5, f"b{i}", ready_max_lifetime=30) for i in range(250)]

    async def main() -> None:
        async with Delayer(url) as d:
            raw.config_resetstat()
            now = redis_now(raw)
            dues = await d.push_many(jobs)
            stats = raw.info("commandstats")
            assert stats["cmdstat_evalsha"]["calls"] == 3
            assert len(dues) == 250
            for i, job in enumerate(jobs):
                assert raw.hgetall(f"delayer:job_bucket:{job.id}") == {
                    b"topic": job.topic.encode(),
                    b"body": f"b{i}".encode(),
                }
                assert abs((raw.zscore(POOL, job.id) or 0) - dues[i]) < 0.0005
                assert now + i % 5 - 0.01 < dues[i] < now + i % 5 + 2
            raw.script_flush()
            more = await d.push_many([Job("t", f"x{i}", 0) for i in range(1001)])
            assert len(more) == 1001
            assert raw.zcard(POOL) == 1251

    run(main)


def test_push_many_with_a_bad_job_late_in_the_list_sends_nothing(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            jobs = [Job("t", f"ok-{i}", 0) for i in range(250)]
            jobs[230] = Job("t", "ok-230", -1)
            raw.config_resetstat()
            with pytest.raises(InvalidArgument, match=r"jobs\[230\]"):
                await d.push_many(jobs)
            assert raw.dbsize() == 0
            assert "cmdstat_evalsha" not in raw.info("commandstats")

    run(main)


def test_validation_touches_nothing(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        async with Delayer(url) as d:
            bad: list[Callable[[], Awaitable[Any]]] = [
                lambda: d.push("t", "", 0),
                lambda: d.push("", "a", 0),
                lambda: d.push("t", "a", -1),
                lambda: d.push("t", "a", float("nan")),
                lambda: d.push("t", "a", 1, b"", 0),
                lambda: d.pop(""),
                lambda: d.bpop("t", -1),
                lambda: d.remove(""),
                lambda: d.push_many([Job("t", "ok", 0), Job("t", "", 0)]),
            ]
            for call in bad:
                with pytest.raises(InvalidArgument):
                    await call()

    run(main)
    assert raw.dbsize() == 0


def test_unreachable_and_wrong_password(auth_server: RedisServer) -> None:
    async def main() -> None:
        port = free_port()
        d = Delayer(f"redis://127.0.0.1:{port}/0")
        start = time.monotonic()
        with pytest.raises(ConnectionFailed, match=f"127.0.0.1:{port}"):
            await d.push("t", "j", 1)
        assert time.monotonic() - start < 3
        await d.close()

        wrong = "async-wrong-pass"
        d = Delayer(f"redis://:{wrong}@127.0.0.1:{auth_server.port}/0")
        with pytest.raises(ConnectionFailed) as info:
            await d.pop("t")
        assert wrong not in str(info.value) and wrong not in repr(d)
        await d.close()

    run(main)


def test_custom_prefix_and_existing_client(url: str, raw: "redis.Redis") -> None:
    async def main() -> None:
        client = aioredis.Redis.from_url(url)
        d = Delayer(prefix="app:", client=client)
        await d.push("t", "j", 0, "x")
        assert raw.exists("app:job_pool") == 1 and raw.exists(POOL) == 0
        move_until(raw, 1, prefix="app:")
        assert await d.bpop("t", 1) == Message("j", "t", b"x")
        await d.close()
        assert await client.ping() is True  # not ours to close
        await aclose(client)

    run(main)
