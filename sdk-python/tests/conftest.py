"""Fixtures: a real redis-server on a free loopback port (no fakes)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest
import redis

REPO_ROOT = Path(__file__).resolve().parents[2]
LUA_DIR = REPO_ROOT / "lua"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    """A port nobody listens on right now (bind to port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process, started for the tests and killed afterwards."""

    def __init__(self, password: Optional[str] = None) -> None:
        self.password = password
        self.dir = tempfile.mkdtemp(prefix="delayer-redis-")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.port = 0
        for _ in range(5):  # another process may grab the free port first
            self.port = free_port()
            if self._start():
                return
        raise RuntimeError("could not start redis-server")

    def _start(self) -> bool:
        args: List[str] = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--daemonize", "no",
            "--loglevel", "warning",
        ]
        if self.password is not None:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        probe = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=1)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    if probe.ping():
                        return True
                except redis.ConnectionError:
                    time.sleep(0.02)
        finally:
            probe.close()
        self.stop()
        return False

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> "redis.Redis":
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def auth_server() -> Iterator[RedisServer]:
    server = RedisServer(password="s3cret-PASSWORD")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator["redis.Redis"]:
    """A plain redis-py client on an emptied database."""
    client = redis_server.client()
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def url(redis_server: RedisServer, raw: "redis.Redis") -> str:
    """The URL of the (emptied) test Redis."""
    return redis_server.url


def move(raw: "redis.Redis", prefix: str = "delayer:", batch: int = 1000) -> List[object]:
    """Run the real server's move.lua once; return its reply."""
    script = (LUA_DIR / "move.lua").read_bytes()
    reply = raw.eval(script, 2, prefix + "job_pool", prefix + "malformed", prefix, batch)
    assert isinstance(reply, list)
    return reply


def move_until(raw: "redis.Redis", count: int, prefix: str = "delayer:", within: float = 5.0) -> int:
    """Run move.lua until ``count`` ids were taken off the pool (polling, with a deadline)."""
    taken = 0
    deadline = time.monotonic() + within
    while True:
        taken += int(move(raw, prefix)[0])  # type: ignore[call-overload]
        if taken >= count:
            return taken
        if time.monotonic() > deadline:
            raise AssertionError(f"only {taken} of {count} ids became due within {within} s")
        time.sleep(0.01)


def redis_now(raw: "redis.Redis") -> float:
    sec, usec = raw.time()
    return sec + usec / 1e6


def wait_until_past(raw: "redis.Redis", due: float, within: float = 5.0) -> None:
    """Poll Redis's clock until it is past ``due``."""
    deadline = time.monotonic() + within
    while redis_now(raw) <= due:
        if time.monotonic() > deadline:
            raise AssertionError("Redis's clock did not reach the due time")
        time.sleep(0.01)
