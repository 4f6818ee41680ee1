"""End to end on a Redis Cluster: the real ``delayer`` server in
``mode = cluster`` moves what both Python clients push on topics of every
master (found through the SDK's index write), never before the due time,
expires an unacked reservation, and carries on, with the same clients,
after a master is killed with SIGKILL.

The binary is ``$DELAYER_BIN``, else the workspace's target/debug/delayer;
a binary without cluster mode (older than the server's "mode = cluster")
skips these tests, saying so.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import delayer.aio as aio
from delayer import Delayer, Job

from conftest import REPO_ROOT, run
from test_cluster import PASSWORD, PREFIX, TOPIC_LAYOUT, WITHIN, aeventually, eventually, spread_topics
from test_topic_layout_server import server_binary
from topickit import key

sys.path.insert(0, str(REPO_ROOT / "testkit"))
import cluster as kit  # noqa: E402


class ClusterServer:
    """The real server on the cluster (``timer_interval = 50``)."""

    def __init__(self, workdir: Path, c: kit.Cluster) -> None:
        self.conf = workdir / "delayer.conf"
        self.conf.write_text(TOPIC_LAYOUT.replace("[delayer]\n", "[delayer]\ntimer_interval = 50\nlog_level = info\n")
                             + c.redis_section())
        self.log = workdir / "server.log"
        self._log_file = open(self.log, "wb")
        self.proc = subprocess.Popen([str(server_binary()), "-c", str(self.conf)], cwd=workdir,
                                     stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT)

    def tail(self) -> str:
        return self.log.read_bytes()[-3000:].decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log_file.close()


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[kit.Cluster]:
    binary = server_binary()
    probe = tmp_path / "probe.conf"
    probe.write_text(TOPIC_LAYOUT + "[redis]\nmode = cluster\n")
    said = subprocess.run([str(binary), "-c", str(probe)], capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL).stderr.decode("utf-8", "replace")
    if "needs nodes" not in said:
        pytest.skip(f"{binary} has no cluster mode yet: {said.strip()[-200:]}")
    c = kit.Cluster(password=PASSWORD)
    try:
        yield c
    finally:
        c.stop()


def redis_now(c: kit.Cluster) -> float:
    with c.node(c.masters()[0]) as r:
        sec, usec = r.time()
    return sec + usec / 1e6


def test_the_server_moves_what_both_clients_push_on_every_master_and_through_a_failover(
    tmp_path: Path, deployment: kit.Cluster
) -> None:
    c = deployment
    server = ClusterServer(tmp_path, c)
    path = tmp_path / "delayer.conf"
    client = Delayer.from_config(path)
    try:
        topics = spread_topics(c, "e2e", per_master=2)
        # Up means moving: a probe comes out of its ready list.
        client.push(topics[0], "probe", 0)
        if client.bpop(topics[0], WITHIN) is None:
            raise AssertionError(f"the server did not move a due job: {server.tail()}")
        dues = client.push_many([Job(t, "short", 0.3, t.encode()) for t in topics])
        for t, due in zip(topics, dues):
            m = client.bpop(t, WITHIN)
            assert m is not None and (m.id, m.body) == ("short", t.encode()), server.tail()
            assert redis_now(c) >= due
        # at least once: an unacked reservation comes back once the server expires it
        client.push(topics[1], "slow", 0)
        held = client.breserve(topics[1], 0.3, WITHIN)
        assert held is not None and held.attempts == 1
        again = client.breserve(topics[1], 30, WITHIN)
        assert again is not None and again.attempts == 2 and redis_now(c) >= held.deadline
        assert client.ack(again) is True

        async def before_and_after() -> None:
            aclient = aio.Delayer.from_config(path)
            try:
                due = await aclient.push(topics[2], "aio", 0.2)
                m = await aclient.bpop(topics[2], WITHIN)
                assert m is not None and m.id == "aio" and redis_now(c) >= due
                victim = topics[3]
                await asyncio.get_running_loop().run_in_executor(None, c.kill_master, key(PREFIX, victim, "pool"))
                due = eventually("push after the failover", lambda: client.push(victim, "after", 0.2))
                m2 = eventually("bpop after the failover", lambda: client.bpop(victim, 5))
                assert m2.id == "after" and redis_now(c) >= due, server.tail()
                await aeventually("async push after the failover", lambda: aclient.push(victim, "aio-after", 0))
                held = await aeventually("async breserve after", lambda: aclient.breserve(victim, 30, 5))
                assert held.id == "aio-after" and await aclient.ack(held) is True
            finally:
                await aclient.close()

        run(before_and_after)
        assert server.proc.poll() is None, server.tail()
    finally:
        client.close()
        server.stop()
