"""The HTTP API on the per-topic layout (PROTOCOL.md, "The per-topic
layout"): the same routes write and read each topic's own keys, through the
Rust SDK, against the real server, which moves and expires them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import harness
from conftest import HttpServer, request

PREFIX = "httptopic:"


@pytest.fixture(scope="module")
def topic_server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[HttpServer]:
    s = HttpServer(workdir, redis_server, prefix=PREFIX, layout="topic")
    yield s
    s.stop()


def ok(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, data, _ = request(server.base, method, path, body)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def test_a_jobs_life_over_http_in_the_per_topic_layout(topic_server: HttpServer, redis_server: Any) -> None:
    r = redis_server.client()
    topic = f"mail-{uuid.uuid4().hex[:8]}"
    jobs = f"/v1/topics/{topic}/jobs"
    ok(topic_server, "POST", jobs, {"id": "1", "delay": 600, "body": "later"}, 201)
    ok(topic_server, "POST", jobs, {"id": "2", "delay": 0, "body": "now"}, 201)
    tag = f"{PREFIX}{{{topic}}}:"
    assert r.zscore(tag + "pool", "1") is not None, "the topic's own pool"
    assert r.hget(tag + "job:1", "body") == b"later"
    # The server's index, from push.lua's announcement, written at its next tick.
    assert harness.wait_until(lambda: r.zscore(PREFIX + "due", topic) is not None
                              and bool(r.sismember(PREFIX + "topics", topic)), 10), "the server never indexed the topic"
    assert ok(topic_server, "GET", f"{jobs}/1")["state"] == "scheduled"

    got = ok(topic_server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert got is not None and (got["id"], got["body"]) == ("2", "now"), got
    assert ok(topic_server, "GET", f"{jobs}/2")["state"] == "reserved"
    assert ok(topic_server, "POST", f"{jobs}/2/bury", {"receipt": got["receipt"], "error": "no"})["buried"] is True
    assert r.lrange(tag + "dead", 0, -1) == [b"2"], "the topic's own dead-letter list"
    assert ok(topic_server, "POST", f"/v1/topics/{topic}/dead/requeue", {"all": True})["requeued"] == 1
    again = ok(topic_server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert again is not None and again["id"] == "2", "re-queued and moved again by the server"
    assert ok(topic_server, "POST", f"{jobs}/2/ack", {"receipt": again["receipt"]})["acked"] is True

    due = ok(topic_server, "POST", f"{jobs}/1/reschedule", {"delay": 300})["due"]
    assert due is not None and abs(r.zscore(tag + "pool", "1") - due) < 0.002
    stats = ok(topic_server, "GET", "/v1/stats")
    mine = [t for t in stats["topics"] if t["topic"] == topic]
    assert mine == [{"topic": topic, "scheduled": 1, "ready": 0, "reserved": 0, "dead": 0, "paused": False,
                     "paused_since": None, "held": 0, "rate_limit": None}], mine
    assert ok(topic_server, "DELETE", f"{jobs}/1")["removed"] is True
    assert r.exists(tag + "job:1") == 0 and r.zscore(tag + "pool", "1") is None
    r.close()
