"""End to end on the per-topic layout: the real ``delayer`` server binary
(``[delayer] layout = topic``) moves what the Python SDK pushes, found through
the SDK's index write, and delivers it after its due time, never before.

The binary is ``$DELAYER_BIN``, else the workspace's target/debug/delayer
(test.sh builds it with the Rust tests before this suite runs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
import redis

import delayer.aio as aio
from delayer import Delayer, Job

from conftest import REPO_ROOT, RedisServer, run
from topickit import WITHIN, key

P = "e2e:"


def server_binary() -> Path:
    given = os.environ.get("DELAYER_BIN")
    path = Path(given) if given else REPO_ROOT / "target" / "debug" / "delayer"
    if not path.exists():
        if given:
            raise FileNotFoundError(f"DELAYER_BIN={given} does not exist")
        pytest.skip(f"no delayer server binary at {path} (cargo build -p delayer-server, or set DELAYER_BIN)")
    return path


class TopicServerProcess:
    """The real server on ``redis_server``, with ``layout = topic``."""

    def __init__(self, workdir: Path, redis_server: RedisServer) -> None:
        self.conf = workdir / "delayer.conf"
        self.conf.write_text(
            "[delayer]\ntimer_interval = 50\n"
            f"key_prefix = {P}\nlayout = topic\nlog_level = info\n"
            f"\n[redis]\nhost = 127.0.0.1\nport = {redis_server.port}\n"
        )
        self.log = workdir / "server.log"
        self._log_file = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [str(server_binary()), "-c", str(self.conf)],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
        )

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
def server(tmp_path: Path, redis_server: RedisServer, raw: "redis.Redis", url: str) -> Iterator[TopicServerProcess]:
    s = TopicServerProcess(tmp_path, redis_server)
    try:
        # Up means moving: a probe pushed through the SDK comes out of its ready list.
        with Delayer(url, P, layout="topic") as d:
            d.push("probe", "p", 0)
            if d.bpop("probe", WITHIN) is None:
                raise AssertionError(f"the server did not move a due job: {s.tail()}")
        yield s
    finally:
        s.stop()


def sample(raw: "redis.Redis", topic: str) -> Tuple[float, int]:
    """Redis's clock and the topic's ready length, read at one instant (MULTI)."""
    with raw.pipeline(transaction=True) as pipe:
        pipe.time()
        pipe.llen(key(P, topic, "ready"))
        (sec, usec), length = pipe.execute()
    return sec + usec / 1e6, int(length)


def watch_until_ready(raw: "redis.Redis", topic: str, due: float) -> List[Tuple[float, int]]:
    """Sample until the job is ready; every sample before ``due`` must show it not ready."""
    samples = []
    deadline = time.monotonic() + WITHIN
    while True:
        now, length = sample(raw, topic)
        samples.append((now, length))
        if length:
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"the job of {topic!r} was not moved within {WITHIN} s")
        time.sleep(0.005)


def test_a_short_delay_is_delivered_after_its_due_time_never_before(
    server: TopicServerProcess, url: str, raw: "redis.Redis"
) -> None:
    with Delayer(url, P, layout="topic") as d:
        due = d.push("mail", "1", 0.5, b"hello")
        samples = watch_until_ready(raw, "mail", due)
        early = [(t, n) for t, n in samples if t < due and n]
        assert early == [], f"ready before its due time {due}: {early}"
        assert samples[-1][0] >= due
        m = d.bpop("mail", WITHIN)
        assert m is not None and (m.id, m.topic, m.body) == ("1", "mail", b"hello")


def test_bpop_waits_for_jobs_of_several_topics_and_delays(
    server: TopicServerProcess, url: str, raw: "redis.Redis"
) -> None:
    with Delayer(url, P, layout="topic") as d:
        jobs = [Job(f"t{i}", "same-id", 0.2 + 0.1 * i, f"body{i}") for i in range(5)]
        dues = d.push_many(jobs)
        for job, due in zip(jobs, dues):
            m = d.bpop(job.topic, WITHIN)
            sec, usec = raw.time()
            assert m is not None and (m.id, m.body) == ("same-id", job.body.encode() if isinstance(job.body, str)
                                                          else job.body)
            assert sec + usec / 1e6 >= due


def test_reserved_and_released_jobs_come_back_through_the_server(
    server: TopicServerProcess, url: str, raw: "redis.Redis"
) -> None:
    async def main() -> None:
        async with aio.Delayer(url, P, layout="topic") as d:
            await d.push("work", "1", 0.2, b"x")
            job = await d.breserve("work", 30, WITHIN)
            assert job is not None and job.attempts == 1
            assert await d.release(job, 0.3) is True  # due again in 0.3 s: the index says so
            due = raw.zscore(key(P, "work", "pool"), "1")
            assert due is not None
            again = await d.breserve("work", 30, WITHIN)
            sec, usec = raw.time()
            assert again is not None and again.attempts == 2 and sec + usec / 1e6 >= due
            assert await d.ack(again) is True

    run(main)
    assert not raw.exists(key(P, "work", "job:1"))


def test_an_expired_reservation_is_delivered_again(server: TopicServerProcess, url: str, raw: "redis.Redis") -> None:
    with Delayer(url, P, layout="topic") as d:
        d.push("slow", "1", 0)
        job = d.breserve("slow", 0.3, WITHIN)  # and never acked: the server ends the attempt at its deadline
        assert job is not None and job.attempts == 1
        again = d.breserve("slow", 30, WITHIN)
        sec, usec = raw.time()
        assert again is not None and again.attempts == 2 and sec + usec / 1e6 >= job.deadline
        assert d.ack(job) is False and d.ack(again) is True
