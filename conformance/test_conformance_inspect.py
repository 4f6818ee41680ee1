"""One job's whole life, seen from every viewpoint (issue 13): at each step
(scheduled, ready, reserved, dead, requeued, done) the CLI's
``delayer job <topic> <id> --json`` and every SDK's ``job(topic, id)`` (through
the drivers' ``job`` op) must report the same state and fields.

The job lives under a prefix of its own that no server moves, and move.lua
(move_topic.lua in the per-topic layout) is run by hand, so each step is
still while the views are read. Every viewpoint reads the suite's layout
(CONFORMANCE_LAYOUT): the CLI and the HTTP API's server from a delayer.conf
that names it.

Adding a viewpoint (the HTTP API's ``GET /v1/topics/{topic}/jobs/{id}``, the
dashboard): write a function ``(ctx, topic, id) -> dict`` answering the JSON
shape below and add it to :data:`VIEWS`; every step then checks it too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, NamedTuple

import pytest
import redis

import harness
from conftest import LAYOUT, Keys
from dashboard_view import dashboard_view
from http_view import http_view

PREFIX = "inspect:"
TOPIC = "close_order"
KEYS = Keys(PREFIX, LAYOUT)
MOVE_LUA = (harness.REPO / "lua" / "move.lua").read_bytes()
MOVE_TOPIC_LUA = (harness.REPO / "lua" / "move_topic.lua").read_bytes()
#: Every viewpoint's answer has exactly these fields (times: Unix seconds; null when absent).
FIELDS = {"id", "state", "topic", "body_size", "attempts", "max_attempts", "due", "deadline", "dead_at",
          "dead_reason", "last_error", "traceparent", "flow"}
TIMES = ("due", "deadline", "dead_at")


class Ctx(NamedTuple):
    drivers: harness.Drivers
    redis_server: harness.RedisServer
    rds: "redis.Redis"
    #: A delayer.conf for the CLI: this Redis, PREFIX, the layout.
    conf: Path


def cli_view(ctx: Ctx, topic: str, job_id: str) -> Dict[str, Any]:
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    # The classic layout's CLI is also checked on a bare URL (no file).
    where = ["--url", ctx.redis_server.url, "--prefix", PREFIX] if LAYOUT == "classic" else ["-c", str(ctx.conf)]
    out = subprocess.run(
        [str(exe), "job", topic, job_id, "--json", *where],
        capture_output=True, timeout=60, env={k: v for k, v in os.environ.items() if k != "DELAYER_URL"},
    )
    assert out.returncode == 0, out.stderr.decode()
    view: Dict[str, Any] = json.loads(out.stdout)
    return view


def sdk_view(sdk: str) -> Callable[[Ctx, str, str], Dict[str, Any]]:
    def view(ctx: Ctx, topic: str, job_id: str) -> Dict[str, Any]:
        job: Dict[str, Any] = harness.ok(ctx.drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]
        return job
    return view


#: name -> function giving that viewpoint's JSON of one job.
VIEWS: Dict[str, Callable[[Ctx, str, str], Dict[str, Any]]] = {
    "cli": cli_view,
    "rust": sdk_view("rust"),
    "python": sdk_view("python"),
    "php": sdk_view("php"),
    # The server's GET /v1/topics/{topic}/jobs/{id}, reading a replica (http_view.py).
    "http": lambda ctx, topic, job_id: http_view(ctx.rds, ctx.redis_server.port, PREFIX, topic, job_id, LAYOUT),
    "dashboard": lambda ctx, topic, job_id: dashboard_view(ctx.rds, ctx.redis_server.port, PREFIX, topic, job_id,
                                                           LAYOUT),
}


@pytest.fixture(scope="module")
def ctx(workdir: Path, redis_server: harness.RedisServer, rds: "redis.Redis") -> Iterator[Ctx]:
    d = workdir / "inspect"  # the drivers' delayer.conf and logs, apart from the session's drivers'
    d.mkdir(exist_ok=True)
    conf = d / "delayer.conf"
    conf.write_text(harness.conf_text(redis_server, PREFIX, LAYOUT))
    drivers = harness.Drivers(redis_server, PREFIX, d, LAYOUT)
    try:
        yield Ctx(drivers, redis_server, rds, conf)
    finally:
        drivers.stop_all()


def move(rds: "redis.Redis") -> None:
    """The server's move of TOPIC's due jobs, once."""
    if LAYOUT == "topic":
        rds.eval(MOVE_TOPIC_LUA, 4, KEYS.pool_of(TOPIC), KEYS.ready(TOPIC), KEYS.reserved_of(TOPIC), KEYS.flow(TOPIC),
                 1000)
        return
    rds.eval(
        MOVE_LUA, 5, PREFIX + "job_pool", PREFIX + "malformed", PREFIX + "scheduled_count", PREFIX + "topics",
        PREFIX + "reserved", PREFIX + "job_bucket:", PREFIX + "ready_queue:", 1000,
    )


def agreed(ctx: Ctx, job_id: str, state: str) -> Dict[str, Any]:
    """Every view's answer; asserts they agree and are in ``state``. Returns the CLI's."""
    views = {name: view(ctx, TOPIC, job_id) for name, view in VIEWS.items()}
    reference = views["cli"]
    assert set(reference) == FIELDS, reference
    assert (reference["state"], reference["id"]) == (state, job_id), reference
    for name, got in views.items():
        assert set(got) == FIELDS, f"{name}: {got}"
        for field in FIELDS:
            want, have = reference[field], got[field]
            if field in TIMES and want is not None and have is not None:
                assert abs(want - have) < 0.0015, f"{name} {field}: {have} != cli {want}"
            else:
                assert have == want, f"{name} {field}: {have!r} != cli {want!r} ({got})"
    return reference


def test_one_job_through_its_whole_life(ctx: Ctx) -> None:
    rds, job_id = ctx.rds, harness.new_id("life")
    for name in ("rust", "python", "php"):
        assert harness.ok(ctx.drivers, name, {"op": "job", "topic": TOPIC, "id": job_id})["job"]["state"] == "unknown"
    agreed(ctx, job_id, "unknown")

    harness.ok(ctx.drivers, "python", {"op": "push", "topic": TOPIC, "id": job_id, "delay_ms": 600_000,
                                       "body_b64": "aGVsbG8=", "max_attempts": 3})
    seen = agreed(ctx, job_id, "scheduled")
    assert (seen["topic"], seen["body_size"], seen["attempts"], seen["max_attempts"]) == (TOPIC, 5, 0, 3)
    assert abs(seen["due"] - float(rds.zscore(KEYS.pool_of(TOPIC), job_id) or 0)) < 0.0015
    assert harness.ok(ctx.drivers, "rust", {"op": "job", "topic": "other", "id": job_id})["job"]["state"] == "unknown"
    assert seen["flow"] == ""
    # Paused: still scheduled, and every view says the topic holds it.
    assert harness.ok(ctx.drivers, "rust", {"op": "pause", "topic": TOPIC})["changed"]
    assert agreed(ctx, job_id, "scheduled")["flow"] == "paused"
    assert harness.ok(ctx.drivers, "php", {"op": "resume", "topic": TOPIC})["changed"]
    assert agreed(ctx, job_id, "scheduled")["flow"] == ""

    harness.ok(ctx.drivers, "php", {"op": "reschedule", "id": job_id, **KEYS.named(TOPIC), "delay_ms": 0})
    move(rds)
    seen = agreed(ctx, job_id, "ready")
    assert seen["due"] is None

    job = harness.ok(ctx.drivers, "rust", {"op": "reserve", "topic": TOPIC, "ttr_ms": 60_000})["job"]
    assert job["id"] == job_id
    seen = agreed(ctx, job_id, "reserved")
    assert seen["attempts"] == 1 and abs(seen["deadline"] - job["deadline"]) < 0.0015

    held = {"id": job_id, **KEYS.named(TOPIC), "receipt": job["receipt"]}
    assert harness.ok(ctx.drivers, "python", {"op": "bury", **held})["done"]
    seen = agreed(ctx, job_id, "dead")
    assert seen["dead_reason"] == "buried" and seen["dead_at"] is not None and seen["deadline"] is None

    assert harness.ok(ctx.drivers, "php", {"op": "requeue_dead", "topic": TOPIC, "ids": [job_id]})["count"] == 1
    seen = agreed(ctx, job_id, "scheduled")
    assert (seen["attempts"], seen["dead_reason"], seen["dead_at"]) == (0, None, None)

    move(rds)
    agreed(ctx, job_id, "ready")
    job = harness.ok(ctx.drivers, "python", {"op": "reserve", "topic": TOPIC, "ttr_ms": 60_000})["job"]
    assert harness.ok(ctx.drivers, "rust", {"op": "ack", "id": job_id, **KEYS.named(TOPIC),
                                            "receipt": job["receipt"]})["done"]
    agreed(ctx, job_id, "unknown")
