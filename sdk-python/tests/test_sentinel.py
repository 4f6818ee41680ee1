"""Sentinel mode: ``[redis] mode = sentinel`` read as the server reads it, and
the sync and asyncio clients through a failover, on both key layouts (1 master, 1 replica, 3
sentinels, real redis-server processes from testkit/sentinel.py; the master
is killed with SIGKILL mid-run)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Tuple, TypeVar

import pytest

from conftest import REPO_ROOT, move_until, run

import delayer
from delayer import ConfigError, Delayer, InvalidArgument
from delayer import aio as delayer_aio

sys.path.insert(0, str(REPO_ROOT / "testkit"))
import sentinel as kit  # noqa: E402

T = TypeVar("T")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "delayer.conf"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("[redis]\nmode = sentinal\n", ':2: [redis] mode: "sentinal" is not a mode: standalone, sentinel or cluster'),
        ("[redis]\nport = 1\nnodes = a:1\n", ":3: [redis] nodes: is only used with mode = sentinel or cluster (mode is standalone)"),
        ("[redis]\nmode = sentinel\nmaster_name = m\n",
         ":2: [redis] mode: mode = sentinel needs nodes (the sentinels: host:port,host:port,...)"),
        ("[redis]\nmode = sentinel\nnodes = a:1\n", ":2: [redis] mode: mode = sentinel needs master_name"),
        ("[redis]\nmode = sentinel\nnodes = a:1,b\nmaster_name = m\n", ':3: [redis] nodes: "b" is not host:port'),
        ("[redis]\nhost = h\nmode = sentinel\nnodes = a:1\nmaster_name = m\n",
         ":2: [redis] host: not used with mode = sentinel: the sentinels name the master (nodes)"),
    ],
)
def test_bad_mode_settings_are_refused_as_the_server_refuses_them(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        Delayer.from_config(path)
    assert f"{path}{message}" == str(e.value)


def test_sentinel_settings_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "[redis]\nmode = sentinel\nnodes = 127.0.0.1:1, [::1]:2\nmaster_name = m\n"
                           "sentinel_password = s3cret\ntls = no\n")
    s = delayer.config.load(path)
    assert s.sentinels == (("127.0.0.1", 1), ("::1", 2)) and s.master_name == "m" and not s.tls
    assert "s3cret" not in repr(s)


def test_constructor_options_go_together() -> None:
    with pytest.raises(InvalidArgument):
        Delayer("redis://127.0.0.1:1/0", sentinels="127.0.0.1:1", master_name="m")
    with pytest.raises(InvalidArgument):
        Delayer(master_name="m")
    with pytest.raises(InvalidArgument):
        Delayer(sentinels=[("127.0.0.1", 1)])  # no master_name


@pytest.fixture(params=["passwords", "tls"])
def sentinels(request: pytest.FixtureRequest, certs: Tuple[Path, Path, Path]) -> Iterator[kit.Sentinels]:
    """Passwords for the master and the sentinels; or TLS everywhere, with the test CA."""
    if request.param == "tls":
        deployment = kit.Sentinels(tls=certs)
    else:
        deployment = kit.Sentinels(redis_password="master-pw", sentinel_password="sentinel-pw")
    try:
        yield deployment
    finally:
        deployment.stop()


def eventually(what: str, f: Callable[[], Optional[T]]) -> T:
    """``f()`` until it gives something, errors of a failover under way included."""
    deadline = time.monotonic() + kit.FAILOVER_DEADLINE
    last: Any = None
    while time.monotonic() < deadline:
        try:
            got = f()
            if got is not None:
                return got
        except delayer.DelayerError as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"{what}: never happened; last error: {last!r}")


async def aeventually(what: str, f: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + kit.FAILOVER_DEADLINE
    last: Any = None
    while time.monotonic() < deadline:
        try:
            got = await f()
            if got is not None:
                return got
        except delayer.DelayerError as e:
            last = e
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: never happened; last error: {last!r}")


def sync_round(client: Delayer, sentinels: kit.Sentinels, tag: str) -> None:
    topic = f"sync-{tag}"
    eventually("push", lambda: client.push(topic, f"{tag}-1", 0) or True)
    eventually("push 2", lambda: client.push(topic, f"{tag}-2", 0) or True)
    eventually("move", lambda: move_until(sentinels.master(), 2) or None)
    assert eventually("pop", lambda: client.pop(topic)).id == f"{tag}-1"
    held = eventually("reserve", lambda: client.reserve(topic, ttr=60))
    assert held.id == f"{tag}-2"
    assert client.ack(held) is True


async def async_round(client: delayer_aio.Delayer, sentinels: kit.Sentinels, tag: str) -> None:
    topic = f"aio-{tag}"

    async def push(n: int) -> bool:
        await client.push(topic, f"{tag}-{n}", 0)
        return True

    await aeventually("push", lambda: push(1))
    await aeventually("push 2", lambda: push(2))
    eventually("move", lambda: move_until(sentinels.master(), 2) or None)
    assert (await aeventually("bpop", lambda: client.bpop(topic, 1))).id == f"{tag}-1"
    held = await aeventually("breserve", lambda: client.breserve(topic, 60, 1))
    assert held.id == f"{tag}-2"
    assert await client.ack(held) is True


def test_sync_and_async_clients_follow_a_failover(tmp_path: Path, sentinels: kit.Sentinels) -> None:
    path = write(tmp_path, sentinels.redis_section())
    client = Delayer.from_config(path)
    assert "master-pw" not in repr(client) and "sentinel-pw" not in repr(client)

    async def body() -> None:
        # One event loop for the async client's whole life: it must carry on
        # through the failover, not be made again.
        aclient = delayer_aio.Delayer.from_config(path)
        try:
            sync_round(client, sentinels, "before")
            await async_round(aclient, sentinels, "before")
            old = sentinels.master_port()
            new = await asyncio.get_running_loop().run_in_executor(None, sentinels.kill_master)
            assert new != old
            sync_round(client, sentinels, "after")
            await async_round(aclient, sentinels, "after")
        finally:
            await aclient.close()

    try:
        run(body)
    finally:
        client.close()


def test_the_per_topic_layout_through_a_failover(tmp_path: Path) -> None:
    """layout = topic with mode = sentinel: the same calls on the topic's own
    keys (and the index) before and after the master is killed."""
    from topickit import key, move_until as move_topic_until

    deployment = kit.Sentinels(redis_password="master-pw", sentinel_password="sentinel-pw")
    path = write(tmp_path, "[delayer]\nlayout = topic\n\n" + deployment.redis_section())

    def round_trip(client: Delayer, tag: str) -> None:
        topic = f"topic-{tag}"
        eventually("push", lambda: client.push(topic, "1", 0) or True)
        eventually("push 2", lambda: client.push(topic, "2", 0) or True)
        assert deployment.master().zscore(key("delayer:", topic, "pool"), "1") is not None
        eventually("move", lambda: move_topic_until(deployment.master(), topic, 2) or None)
        assert deployment.master().llen(key("delayer:", topic, "ready")) == 2
        assert eventually("pop", lambda: client.pop(topic)).id == "1"
        held = eventually("reserve", lambda: client.reserve(topic, ttr=60))
        assert held.id == "2" and client.ack(held) is True

    client = Delayer.from_config(path)
    try:
        assert client.keys.layout == "topic"
        round_trip(client, "before")
        old = deployment.master_port()
        assert deployment.kill_master() != old
        round_trip(client, "after")
    finally:
        client.close()
        deployment.stop()
