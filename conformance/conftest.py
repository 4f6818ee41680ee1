"""Session fixtures: one real redis-server, one real delayer server, and the
four line-protocol drivers, shared by every test and stopped at the end (also
when tests fail, are interrupted, or pytest gets SIGTERM).

Environment knobs:
  DELAYER_BIN          the delayer server binary (default target/debug/delayer,
                       built with `cargo build -q -p delayer-server` if missing)
  DELAYER_DRIVER_BIN   the Rust driver (default target/debug/delayer-conformance-driver,
                       built with `cargo build -q -p delayer-conformance-driver` if missing)
  CONFORMANCE_PREFIX   key prefix for server and clients (default "delayer:", 1.x's)
  KEEP_TMP=1           keep the temp dir (logs of redis, server and drivers)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

PREFIX = os.environ.get("CONFORMANCE_PREFIX", "delayer:")
TIMER_INTERVAL_MS = 100


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    harness._kill_group_on_signal()
    d = Path(tempfile.mkdtemp(prefix="delayer-conformance-"))
    yield d
    if os.environ.get("KEEP_TMP"):
        print(f"\nconformance logs kept in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server(workdir: Path) -> Iterator[harness.RedisServer]:
    server = harness.RedisServer(workdir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def rds(redis_server: harness.RedisServer) -> Iterator["redis.Redis"]:
    """The test's own Redis connection, for looking at keys and TIME."""
    r = redis_server.client()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="session")
def delayer_server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[harness.DelayerServer]:
    server = harness.DelayerServer(workdir, redis_server, PREFIX, TIMER_INTERVAL_MS)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def drivers(workdir: Path, redis_server: harness.RedisServer) -> Iterator[harness.Drivers]:
    d = harness.Drivers(redis_server, PREFIX, workdir)
    try:
        yield d
    finally:
        d.stop_all()


@pytest.fixture(scope="session")
def keys() -> "Keys":
    return Keys(PREFIX)


class Keys:
    """The protocol's key names (docs/PROTOCOL.md), for the test's own checks."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pool = prefix + "job_pool"

    def bucket(self, job_id: str) -> str:
        return self.prefix + "job_bucket:" + job_id

    def ready(self, topic: str) -> str:
        return self.prefix + "ready_queue:" + topic
