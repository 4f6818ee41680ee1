"""A paused topic's waits on a Redis Cluster (design 23 §3, slice 1): the
gate ``{<topic>}:gate`` is in the topic's slot, so the BRPOPLPUSH on it goes to
the topic's master, as the BRPOP on ``{<topic>}:ready`` does; sync and
asyncio, topics on every master. The sync client pauses and resumes with its
own calls (flow_topic.lua: one script on the topic's node, no MULTI); the
asyncio test writes the pause and resume by hand."""

from __future__ import annotations

import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import REPO_ROOT, run
from delayer import Delayer, Message
from delayer import aio as delayer_aio
from topickit import key, move_until

sys.path.insert(0, str(REPO_ROOT / "testkit"))
import cluster as kit  # noqa: E402

P = "delayer:"


@pytest.fixture(scope="module")
def cluster() -> Iterator[kit.Cluster]:
    c = kit.Cluster()
    try:
        yield c
    finally:
        c.stop()


def config(tmp_path: Path, c: kit.Cluster) -> Path:
    path = tmp_path / "delayer.conf"
    path.write_text("[delayer]\nlayout = topic\n\n" + c.redis_section())
    return path


def spread(c: kit.Cluster, tag: str) -> List[str]:
    """One topic per master."""
    owners: dict = {}
    n = 0
    while len(owners) < len(c.masters()):
        topic = f"{tag}-{n}"
        owners.setdefault(c.master_for(key(P, topic, "pool")), topic)
        n += 1
    return list(owners.values())


def pause_all(raw: object, topics: List[str]) -> None:
    for t in topics:
        raw.hset(key(P, t, "flow"), "paused", "1.000")  # type: ignore[attr-defined]


#: What a resume writes, in one step on the topic's node (a cluster client
#: has no MULTI before redis-py 5: a script, routed by its keys, is atomic too).
RESUME = ("redis.call('HDEL', KEYS[1], 'paused') redis.call('DEL', KEYS[2]) "
          "redis.call('RPUSH', KEYS[2], '1') redis.call('PEXPIRE', KEYS[2], 60000)")


def resume_all(raw: object, topics: List[str]) -> None:
    for t in topics:
        raw.eval(RESUME, 2, key(P, t, "flow"), key(P, t, "gate"))  # type: ignore[attr-defined]


def test_paused_waits_block_on_each_topics_gate_and_wake_at_resume(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()
    client = Delayer.from_config(config(tmp_path, cluster))
    try:
        topics = spread(cluster, "sync-flow")
        # Ready before the pause: the server's move_topic.lua moves nothing of a paused topic.
        for t in topics:
            client.push(t, "a", 0, b"A")
            assert move_until(raw, t, 1) == 1
        for t in topics:
            assert client.pause(t) is True and client.pause(t) is False
            state = client.flow(t)
            assert state.paused and state.held == 0  # the job is ready already, not held in the pool
        assert all(client.is_paused(t) for t in topics)
        for t in topics:
            assert client.pop(t) is None and client.reserve(t, 60) is None
        waiters = [Delayer.from_config(config(tmp_path, cluster)) for _ in topics]
        try:
            with ThreadPoolExecutor(len(topics)) as pool:
                waits = [pool.submit(w.bpop, t, 20) for w, t in zip(waiters, topics)]
                time.sleep(1.0)  # the point: a second paused, nothing handed out
                assert not any(w.done() for w in waits)
                start = time.monotonic()
                assert all(client.resume(t) for t in topics)
                got = [w.result(timeout=5) for w in waits]
        finally:
            for w in waiters:
                w.close()
        assert time.monotonic() - start < 2.0
        assert all(isinstance(m, Message) and m.id == "a" for m in got)
        assert not any(client.is_paused(t) for t in topics) and not any(client.resume(t) for t in topics)
    finally:
        client.close()
        raw.close()


def test_the_asyncio_client_waits_on_the_gate_too(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()

    async def main() -> None:
        client = delayer_aio.Delayer.from_config(config(tmp_path, cluster))
        try:
            topics = spread(cluster, "aio-flow")
            for t in topics:
                await client.push(t, "a", 0, b"A")
                assert move_until(raw, t, 1) == 1
            pause_all(raw, topics)
            assert [await client.is_paused(t) for t in topics] == [True] * len(topics)  # flow_topic.lua per node
            waits = [asyncio.ensure_future(client.breserve(t, 60, 20)) for t in topics]
            await asyncio.sleep(1.0)
            assert not any(w.done() for w in waits)
            start = time.monotonic()
            resume_all(raw, topics)
            got = await asyncio.wait_for(asyncio.gather(*waits), 5)
            assert time.monotonic() - start < 2.0
            assert all(m is not None and m.id == "a" for m in got)
            assert [await client.resume(t) for t in topics] == [False] * len(topics)  # resumed by hand already
        finally:
            await client.close()

    try:
        run(main)
    finally:
        raw.close()
