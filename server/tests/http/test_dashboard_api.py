"""What the dashboard reads, over the API: dead letters paged to the end
(past 100, past entries whose job is gone), a job's body on request
(size-limited, any bytes), and the long history shared by every server
through Redis (bounded, checked when read)."""

from __future__ import annotations

import importlib.util
import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

import harness
from conftest import PREFIX, REPO, TOKEN, HttpServer, request


def ok(server: HttpServer, path: str) -> Any:
    status, data, _ = request(server.base, "GET", path)
    assert status == 200, f"GET {path}: {status} {data}"
    return data


def bury_by_hand(rds: Any, topic: str, ids: List[str], error: str = "") -> None:
    """Dead letters as release.lua leaves them (bucket fields and the list)."""
    pipe = rds.pipeline()
    for i, job_id in enumerate(ids):
        fields = {"topic": topic, "body": f'{{"n": {i}}}', "attempts": 3, "dead_reason": "max_attempts",
                  "dead_at": f"{1_700_000_000 + i}.000"}
        if error:
            fields["last_error"] = error
        pipe.hset(f"{PREFIX}job_bucket:{job_id}", mapping=fields)
        pipe.lpush(f"{PREFIX}dead:{topic}", job_id)
    pipe.execute()


def test_dead_letters_page_to_the_end_past_stale_entries(server: HttpServer, redis_server: Any) -> None:
    rds = redis_server.client()
    topic = "dead-" + uuid.uuid4().hex[:6]
    ids = [f"d{i}" for i in range(250)]
    bury_by_hand(rds, topic, ids, error="smtp: 550 mailbox unavailable")
    # Jobs removed since they died leave stale entries a listing skips: the
    # first page comes back short, yet the list goes on.
    gone = {"d249", "d248", "d120"}
    rds.delete(*[f"{PREFIX}job_bucket:{g}" for g in gone])
    seen: List[str] = []
    start: Any = 0
    pages = 0
    while start is not None:
        page = ok(server, f"/v1/topics/{topic}/dead?start={start}&count=100")
        assert page["total"] == 250, page["total"]
        seen += [d["id"] for d in page["dead"]]
        assert all(d["last_error"] == "smtp: 550 mailbox unavailable" for d in page["dead"])
        start = page["next"]
        pages += 1
        assert pages <= 3, "paging does not end"
    assert pages == 3
    assert sorted(seen) == sorted(set(ids) - gone), "every dead letter, once"
    assert len(seen) == len(set(seen))


def test_a_jobs_body_on_request_limited_and_any_bytes(server: HttpServer, redis_server: Any) -> None:
    rds = redis_server.client()
    topic = "body-" + uuid.uuid4().hex[:6]
    jobs = f"/v1/topics/{topic}/jobs"
    hostile = '<img src=x onerror="alert(1)">'
    for job_id, body in [("json", '{"order": 42, "items": [1, 2]}'), ("html", hostile), ("big", "x" + "é" * 40_000)]:
        status, data, _ = request(server.base, "POST", jobs, {"id": job_id, "delay": 600, "body": body})
        assert status == 201, data
    assert ok(server, f"{jobs}/json?body=true")["body"] == '{"order": 42, "items": [1, 2]}'
    assert ok(server, f"{jobs}/html?body=true")["body"] == hostile
    assert "body" not in ok(server, f"{jobs}/json"), "the body only when asked"
    # 80,001 bytes, mostly two-byte characters: cut to 64 KiB at a
    # character's start (byte 65,536 is the middle of one).
    big = ok(server, f"{jobs}/big?body=true")
    assert big["body_truncated"] is True and big["body_size"] == 80_001
    assert big["body"] == "x" + "é" * 32_767, len(big["body"])
    # Bytes that are not UTF-8 come as base64; too large to read: said so.
    rds.hset(f"{PREFIX}job_bucket:big", "body", b"\xff\x00" + b"x" * (2 * 1024 * 1024))
    assert ok(server, f"{jobs}/big?body=true")["body_truncated"] is True
    rds.hset(f"{PREFIX}job_bucket:big", "body", b"\xff\x00")
    assert ok(server, f"{jobs}/big?body=true")["body_base64"] == "/wA="
    # Another topic's job of the same id (ids are global in this layout),
    # and an unknown one, show no body.
    assert "body" not in ok(server, f"/v1/topics/other/jobs/json?body=true")
    assert ok(server, f"{jobs}/nope?body=true")["state"] == "unknown"
    status, data, _ = request(server.base, "GET", f"{jobs}/json?bodies=1")
    assert status == 400, data


def shared_moved(server: HttpServer, seconds: int = 3600) -> Dict[int, int]:
    history = ok(server, f"/v1/history?seconds={seconds}")
    assert history["step"] == 10
    return {s["t"]: s["moved"] for s in history["samples"] if s["moved"]}


def test_the_history_is_kept_in_redis_for_every_server(server: HttpServer, redis_server: Any,
                                                        workdir: Path) -> None:
    rds = redis_server.client()
    key = f"{PREFIX}history"
    topic = "hist-" + uuid.uuid4().hex[:6]
    before = sum(shared_moved(server).values())
    jobs = [{"topic": topic, "id": f"h{i}", "delay": 0} for i in range(40)]
    assert request(server.base, "POST", "/v1/jobs", {"jobs": jobs})[0] == 200
    assert harness.wait_until(lambda: sum(shared_moved(server).values()) >= before + 40, step=0.2), \
        "the moves reach the shared history"
    # Written to Redis, one member per 10 s sample, each server's part apart.
    members = rds.zrange(key, 0, -1, withscores=True)
    assert members and all(json.loads(m)["t"] == s and s % 10 == 0 for m, s in members)
    # Another server's part of an earlier sample shows here too.
    now = int(time.time())
    earlier = now - now % 10 - 60
    rds.zadd(key, {json.dumps({"t": earlier, "by": {"elsewhere": [7, 70, 7, 15]}}): earlier})
    assert harness.wait_until(lambda: shared_moved(server).get(earlier) == 7, step=0.2)
    # A new server (a restart, or a second one) reads the same history.
    second = HttpServer(workdir, redis_server, name="history-second")
    try:
        assert harness.wait_until(lambda: shared_moved(second) == shared_moved(server), step=0.2), \
            (shared_moved(second), shared_moved(server))
        # Bounded: a sample older than a day is dropped at the next write.
        old = now - 2 * 86_400
        old -= old % 10
        rds.zadd(key, {json.dumps({"t": old, "by": {"x": [1, 0, 0, 0]}}): old})
        assert request(server.base, "POST", f"/v1/topics/{topic}/jobs", {"id": "again", "delay": 0})[0] == 201
        assert harness.wait_until(lambda: rds.zscore(key, json.dumps({"t": old, "by": {"x": [1, 0, 0, 0]}})) is None,
                                  step=0.2), "the old sample stays"
        # A key of another type is said (naming it), served around, and
        # recovered from once fixed.
        rds.delete(key)
        rds.set(key, "not a history")
        wrong = lambda: (ok(second, "/v1/history?seconds=3600")["shared"]["error"] or "")  # noqa: E731
        assert harness.wait_until(lambda: key in wrong() and "WRONGTYPE" in wrong(), step=0.2), wrong()
        assert key in second.log_text()
        assert ok(second, "/v1/history?seconds=60")["samples"], "the per-second history still answers"
        rds.delete(key)
        assert harness.wait_until(lambda: wrong() == "", step=0.2)
    finally:
        second.stop()
    # Samples of 1 or 10 seconds, no other.
    assert request(server.base, "GET", "/v1/history?seconds=60&step=5")[0] == 400


def test_the_demo_data_fills_every_state(server: HttpServer) -> None:
    """tools/demo-data.py (the screenshots' data set) runs against a real
    server and leaves jobs in every state, dead ones saying why."""
    spec = importlib.util.spec_from_file_location("demo_data", REPO / "tools" / "demo-data.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    counts = demo.fill(demo.Api(server.base, TOKEN), seed=1)
    assert counts["orders.close"] == 140 and counts["webhooks.retry"] == 240
    topics = {t["topic"]: t for t in ok(server, "/v1/stats")["topics"]}
    assert topics["reviews.auto"]["reserved"] == 4 and topics["sms.remind"]["dead"] >= 7
    dead = ok(server, "/v1/topics/sms.remind/dead")["dead"]
    assert all(d["last_error"] for d in dead) and all(json.loads(d["body"])["to"] for d in dead)
