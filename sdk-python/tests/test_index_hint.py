"""The per-topic layout's index (``<prefix>due``, ``<prefix>topics``) is the
server's (issue 21): no SDK call touches it. Here an index key holds a
string (WRONGTYPE), or Redis is full (OOM): push, push_many, reserve and
touch answer their script's result, the job is really there, and the index
key is left as it was (the server names it). Sync and asyncio clients, real
redis-server."""

from __future__ import annotations

import logging
from typing import Any, Iterator, List

import pytest
import redis

import delayer.aio as aio
from delayer import Delayer, Job

from conftest import RedisServer, run

TTR = 30.0


def make_ready(raw: "redis.Redis", prefix: str, topic: str, job_id: str) -> None:
    """The server's part for a waiting job: from the pool to its ready queue."""
    assert raw.zrem(f"{prefix}{{{topic}}}:pool", job_id) == 1, f"{job_id} not waiting"
    raw.lpush(f"{prefix}{{{topic}}}:ready", job_id)


def warnings_about(caplog: pytest.LogCaptureFixture, key: str) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and repr(key) in r.getMessage()]


def check_jobs(raw: "redis.Redis", prefix: str, broken: str) -> None:
    """The jobs as a server started later would read them: pool and hash."""
    for job_id in ("1", "2", "3"):
        assert raw.exists(f"{prefix}{{mail}}:job:{job_id}"), f"{broken}: job {job_id}"
    assert raw.zscore(f"{prefix}{{mail}}:pool", "2") is not None


@pytest.mark.parametrize("broken", ["topics", "due"])
def test_a_wrong_typed_index_key_fails_no_call(
    raw: "redis.Redis", url: str, broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"sync-{broken}:"
    raw.set(f"{prefix}{broken}", "x")
    with caplog.at_level(logging.WARNING, logger="delayer"), Delayer(url, prefix, layout="topic") as d:
        assert d.push("mail", "1", 0) > 0
        assert len(d.push_many([Job("mail", "2", 0), Job("mail", "3", 0)], if_absent=True)) == 2
        check_jobs(raw, prefix, broken)
        make_ready(raw, prefix, "mail", "1")
        job = d.reserve("mail", TTR)
        assert job is not None and job.id == "1"
        assert d.touch(job, TTR) is not None
    assert warnings_about(caplog, f"{prefix}{broken}") == []
    assert raw.get(f"{prefix}{broken}") == b"x"  # never written by a client


@pytest.mark.parametrize("broken", ["topics", "due"])
def test_a_wrong_typed_index_key_fails_no_async_call(
    raw: "redis.Redis", url: str, broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"aio-{broken}:"
    raw.set(f"{prefix}{broken}", "x")

    async def body() -> None:
        async with aio.Delayer(url, prefix, layout="topic") as d:
            assert await d.push("mail", "1", 0) > 0
            assert len(await d.push_many([Job("mail", "2", 0), Job("mail", "3", 0)], if_absent=True)) == 2
            check_jobs(raw, prefix, broken)
            make_ready(raw, prefix, "mail", "1")
            job = await d.reserve("mail", TTR)
            assert job is not None and job.id == "1"
            assert await d.touch(job, TTR) is not None

    with caplog.at_level(logging.WARNING, logger="delayer"):
        run(body)
    assert warnings_about(caplog, f"{prefix}{broken}") == []
    assert raw.get(f"{prefix}{broken}") == b"x"  # never written by a client


@pytest.fixture
def full_server() -> Iterator[RedisServer]:
    server = RedisServer(args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"])
    try:
        yield server
    finally:
        server.stop()


def fill(raw: "redis.Redis") -> None:
    """Filler keys until Redis refuses a write (OOM)."""
    filler = "f" * 65536
    for n in range(10_000):
        try:
            raw.set(f"filler:{n}", filler)
        except redis.exceptions.OutOfMemoryError:
            return
    raise AssertionError("Redis never filled up")


def test_a_full_redis_hands_out_the_reserved_job(full_server: RedisServer) -> None:
    raw: Any = full_server.client()
    with Delayer(full_server.url, "full:", layout="topic") as d:
        d.push("mail", "1", 0)
        d.push("mail", "2", 0)
        make_ready(raw, "full:", "mail", "1")
        make_ready(raw, "full:", "mail", "2")
        fill(raw)
        first = d.reserve("mail", TTR)

    async def reserve() -> Any:
        async with aio.Delayer(full_server.url, "full:", layout="topic") as d:
            return await d.reserve("mail", TTR)

    second = run(reserve)
    assert first is not None and second is not None
    assert [first.id, second.id] == ["1", "2"]
    raw.close()
