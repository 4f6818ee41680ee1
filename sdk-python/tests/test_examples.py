"""The README's worker examples are tested code (issue 10, item 4).

Each ``examples/*.py`` worker runs as its own process against a real
redis-server, which is halted and started again while the worker waits: the
worker must report the lost connection, back off, and take the next job once
Redis is back. The README must show every example unchanged, and every worker
loop it shows must be one of them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from delayer import Delayer

from conftest import RedisServer, move_until

SDK = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((SDK / "examples").glob("*.py"))


def readme_blocks() -> List[str]:
    """The README's ``python`` code blocks."""
    text = (SDK / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"worker.py", "reliable_worker.py", "aio_worker.py"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_readme_shows_the_example_unchanged(example: Path) -> None:
    assert example.read_text(encoding="utf-8") in readme_blocks()


def test_every_worker_loop_in_the_readme_is_a_tested_example() -> None:
    examples = {p.read_text(encoding="utf-8") for p in EXAMPLES}
    loops = [b for b in readme_blocks() if "while True" in b]
    assert loops, "the README shows no worker loop"
    for block in loops:
        assert block in examples, f"a worker loop in the README is not one of examples/*.py:\n{block}"


class Worker:
    """An example worker process, its output gathered line by line."""

    def __init__(self, example: Path, url: str) -> None:
        env = dict(os.environ, DELAYER_URL=url, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(example)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.out: List[str] = []
        self.err: List[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._gather, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _gather(stream: object, lines: List[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append(line.rstrip("\n"))

    def wait_for(self, what: str, check: Callable[[], bool], within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while not check():
            if self.proc.poll() is not None:
                raise AssertionError(f"the worker exited ({self.proc.returncode}) before {what}: {self.err}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {within} s; stdout {self.out}, stderr {self.err}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def worker_for(own_server: RedisServer) -> Iterator[Callable[[Path], Worker]]:
    workers: List[Worker] = []

    def start(example: Path) -> Worker:
        workers.append(Worker(example, own_server.url))
        return workers[-1]

    yield start
    for w in workers:
        w.stop()


def push_ready(server: RedisServer, job_id: str, body: str) -> None:
    """Push a job on "email" due now, and let the server's move.lua make it ready."""
    with Delayer(server.url) as d:
        d.push("email", job_id, 0, body)
    raw = server.client()
    try:
        move_until(raw, 1)
    finally:
        raw.close()


def blocked_clients(server: RedisServer) -> int:
    raw = server.client()
    try:
        return int(raw.info("clients")["blocked_clients"])
    finally:
        raw.close()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_worker_outlives_a_redis_restart(
    example: Path, own_server: RedisServer, worker_for: Callable[[Path], Worker]
) -> None:
    w = worker_for(example)
    push_ready(own_server, "job-1", "first")
    w.wait_for("first job", lambda: "email job-1 first" in w.out)
    w.wait_for("a wait for the next job", lambda: blocked_clients(own_server) >= 1)

    own_server.halt()  # while the worker waits
    w.wait_for("report of the lost connection", lambda: any("Redis unavailable" in e for e in w.err))
    own_server.start_again()

    push_ready(own_server, "job-2", "second")
    w.wait_for("second job, after the restart", lambda: "email job-2 second" in w.out)
    assert w.out == ["email job-1 first", "email job-2 second"]
    assert all(e.startswith("Redis unavailable, retrying in ") for e in w.err), w.err
    assert any("cannot reach Redis" in e for e in w.err), w.err  # ConnectionFailed's message
    if example.name == "reliable_worker.py":  # acked: nothing is left reserved
        raw = own_server.client()
        try:
            w.wait_for(
                "the ack", lambda: raw.zcard("delayer:reserved") == 0 and not raw.exists("delayer:job_bucket:job-2")
            )
        finally:
            raw.close()
