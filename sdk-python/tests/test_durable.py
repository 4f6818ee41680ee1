"""Durable pushes (``durable=...``): WAIT 1 after the write, on its connection.

With a replica the push returns as usual; with none, the job is written on
the master all the same and the push raises NotReplicatedError, carrying
what the push would have returned. Real redis-server processes: a primary
and, for the replicated case, a replica of it."""

from __future__ import annotations

import time
from typing import Iterator

import pytest
import redis

from conftest import RedisServer, run

from delayer import Delayer, InvalidArgument, Job, NotReplicatedError
from delayer import aio as delayer_aio


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisServer]:
    """A primary with one replica in sync (yields the primary)."""
    # No diskless-sync delay: Redis 7 waits 5 s by default for more replicas
    # before the first sync starts.
    primary = RedisServer(args=["--repl-diskless-sync-delay", "0"])
    replica = RedisServer(args=["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        deadline = time.monotonic() + 30
        with replica.client() as r:
            while r.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not sync"
                time.sleep(0.05)
        yield primary
    finally:
        replica.stop()
        primary.stop()


def test_a_durable_push_returns_once_a_replica_has_it(replicated: RedisServer) -> None:
    client = Delayer(replicated.url, prefix="durable:")
    try:
        # Generous waits: a replica in sync answers at once, but a loaded
        # machine has made it miss the default 1 s (durable=True).
        due = client.push("t", "a", 60, durable=10)
        assert due > 0
        dues = client.push_many([Job("t", "b", 60), Job("t", "c", 60)], durable=10)
        assert len(dues) == 2
    finally:
        client.close()
    with replicated.client() as r:
        assert r.zcard("durable:job_pool") == 3


def test_without_a_replica_the_push_is_written_and_says_so(raw: "redis.Redis", url: str) -> None:
    client = Delayer(url)
    try:
        with pytest.raises(NotReplicatedError) as e:
            client.push("t", "alone", 60, durable=0.05)
        assert isinstance(e.value.due, float) and e.value.timeout == 0.05
        assert "no replica acknowledged" in str(e.value)
        assert raw.zscore("delayer:job_pool", "alone") == pytest.approx(e.value.due, abs=0.002)
        with pytest.raises(NotReplicatedError) as many:
            client.push_many([Job("t", "m1", 60), Job("t", "m2", 60)], durable=0.05)
        assert isinstance(many.value.due, list) and len(many.value.due) == 2
        assert raw.zcard("delayer:job_pool") == 3
        # Not durable: the same push just works.
        assert client.push("t", "plain", 60) > 0
        with pytest.raises(InvalidArgument):
            client.push("t", "x", 60, durable=-1)
    finally:
        client.close()


def test_the_async_client_alike(replicated: RedisServer, url: str) -> None:
    async def body() -> None:
        with_replica = delayer_aio.Delayer(replicated.url, prefix="durable-aio:")
        alone = delayer_aio.Delayer(url, prefix="durable-aio:")
        try:
            assert await with_replica.push("t", "a", 60, durable=10) > 0
            assert len(await with_replica.push_many([Job("t", "b", 60)], durable=10)) == 1
            with pytest.raises(NotReplicatedError):
                await alone.push("t", "c", 60, durable=0.05)
        finally:
            await with_replica.close()
            await alone.close()

    run(body)


def test_durable_true_means_the_default_wait() -> None:
    from delayer import _send as _durable

    assert _durable.timeout_of(True) == _durable.DEFAULT_TIMEOUT == 1.0
    assert _durable.timeout_of(10) == 10
