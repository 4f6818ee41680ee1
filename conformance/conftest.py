"""Session fixtures: one real redis-server, one real delayer server, and the
four line-protocol drivers, shared by every test and stopped at the end (also
when tests fail, are interrupted, or pytest gets SIGTERM).

Environment knobs:
  DELAYER_BIN          the delayer server binary (default target/debug/delayer,
                       built with `cargo build -q -p delayer-server` if missing)
  DELAYER_DRIVER_BIN   the Rust driver (default target/debug/delayer-conformance-driver,
                       built with `cargo build -q -p delayer-conformance-driver` if missing)
  CONFORMANCE_PREFIX   key prefix for server and clients (default "delayer:", 1.x's)
  CONFORMANCE_LAYOUT   key layout of server and clients: classic (default) or
                       topic (PROTOCOL.md, "The per-topic layout"); in topic the
                       raw1x driver (a Delayer 1.x client) takes no part
  KEEP_TMP=1           keep the temp dir (logs of redis, server and drivers)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

PREFIX = os.environ.get("CONFORMANCE_PREFIX", "delayer:")
LAYOUT = os.environ.get("CONFORMANCE_LAYOUT", "classic")
if LAYOUT not in ("classic", "topic"):
    raise ValueError(f"CONFORMANCE_LAYOUT={LAYOUT!r}: classic or topic")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """In the per-topic layout, a Delayer 1.x client (raw1x) cannot take part."""
    if LAYOUT != "topic":
        return
    skip = pytest.mark.skip(reason="a Delayer 1.x client writes the classic layout only")
    for item in items:
        if "raw1x" in item.name:
            item.add_marker(skip)
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
    server = harness.DelayerServer(workdir, redis_server, PREFIX, TIMER_INTERVAL_MS, LAYOUT)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def http_server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[harness.DelayerServer]:
    """A second server on the same Redis, with the HTTP API (any number of
    servers may run): the flow-control tests' HTTP controller."""
    port = harness.free_port()
    server = harness.DelayerServer(workdir / "http-server", redis_server, PREFIX, TIMER_INTERVAL_MS, LAYOUT,
                                   extra=f"http_addr = 127.0.0.1:{port}\n")
    server.http_port = port  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def drivers(workdir: Path, redis_server: harness.RedisServer) -> Iterator[harness.Drivers]:
    d = harness.Drivers(redis_server, PREFIX, workdir, LAYOUT)
    try:
        yield d
    finally:
        d.stop_all()


@pytest.fixture(scope="session")
def keys() -> "Keys":
    return Keys(PREFIX, LAYOUT)


class Keys:
    """The protocol's key names (docs/PROTOCOL.md), for the test's own checks,
    in either layout (the topic is needed in the per-topic one)."""

    def __init__(self, prefix: str, layout: str = "classic") -> None:
        self.prefix = prefix
        self.layout = layout
        #: The classic layout's one pool (tests that only run classic).
        self.pool = prefix + "job_pool"

    def _of(self, topic: Optional[str], kind: str) -> str:
        if topic is None:
            raise ValueError("the per-topic layout needs the topic")
        return f"{self.prefix}{{{topic}}}:{kind}"

    def pool_of(self, topic: str) -> str:
        return self._of(topic, "pool") if self.layout == "topic" else self.pool

    def bucket(self, job_id: str, topic: Optional[str] = None) -> str:
        if self.layout == "topic":
            return self._of(topic, "job:") + job_id
        return self.prefix + "job_bucket:" + job_id

    def ready(self, topic: str) -> str:
        if self.layout == "topic":
            return self._of(topic, "ready")
        return self.prefix + "ready_queue:" + topic

    def reserved_of(self, topic: str) -> str:
        return self._of(topic, "reserved") if self.layout == "topic" else self.prefix + "reserved"

    def dead(self, topic: str) -> str:
        return self._of(topic, "dead") if self.layout == "topic" else self.prefix + "dead:" + topic

    def flow(self, topic: str) -> str:
        """The topic's flow control hash (a pause is its field "paused")."""
        return self._of(topic, "flow") if self.layout == "topic" else self.prefix + "flow:" + topic

    def gate(self, topic: str) -> str:
        """The list a paused topic's waiters block on."""
        return self._of(topic, "gate") if self.layout == "topic" else self.prefix + "flow_gate:" + topic

    def named(self, topic: str) -> Dict[str, str]:
        """The "topic" of a request that names a job by id (remove, reschedule,
        ack, ...): the per-topic layout needs it; in the classic layout the
        call names the id alone, as Delayer 1.x's did."""
        return {"topic": topic} if self.layout == "topic" else {}
