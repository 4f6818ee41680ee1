"""Jobs whose id is not UTF-8 over HTTP, both layouts: the API hands them out
with ``id_base64`` and takes them back by their bytes, percent-encoded in the
path (``%FF``) and as ``ids_base64`` in a dead-letter requeue or purge. Such
jobs are written by other writers (Delayer 1.x, the Rust SDK by bytes); here
one is pushed with a stand-in id and renamed in Redis to its bytes."""

from __future__ import annotations

import base64
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest

import harness
from conftest import PREFIX, HttpServer, request

TOPIC_PREFIX = "httpraw:"


@pytest.fixture(scope="module", params=["classic", "topic"])
def layout(request: Any, workdir: Path, redis_server: harness.RedisServer,
           server: HttpServer) -> Iterator[Tuple[str, HttpServer, str]]:
    """(layout, its server, its key prefix)."""
    if request.param == "classic":
        yield "classic", server, PREFIX
        return
    s = HttpServer(workdir, redis_server, prefix=TOPIC_PREFIX, layout="topic", name="raw-topic")
    yield "topic", s, TOPIC_PREFIX
    s.stop()


def ok(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, data, _ = request(server.base, method, path, body)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def plant(layout: Tuple[str, HttpServer, str], r: Any, topic: str) -> Tuple[bytes, str]:
    """A job of `topic` scheduled 600 s away whose id is not UTF-8: (its
    id, the path that names it)."""
    kind, server, prefix = layout
    stand_in, raw = f"in-{uuid.uuid4().hex}", b"\xff\xfe/ " + uuid.uuid4().hex.encode()
    ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": stand_in, "delay": 600, "body": "b"}, 201)
    if kind == "classic":
        bucket, pool = f"{prefix}job_bucket:".encode(), f"{prefix}job_pool"
    else:
        bucket, pool = f"{prefix}{{{topic}}}:job:".encode(), f"{prefix}{{{topic}}}:pool"
    due = r.zscore(pool, stand_in)
    assert due is not None
    r.rename(bucket + stand_in.encode(), bucket + raw)
    r.zrem(pool, stand_in)
    r.zadd(pool, {raw: due})
    return raw, f"/v1/topics/{topic}/jobs/{urllib.parse.quote(raw, safe='')}"


def named(job: Any, raw: bytes) -> None:
    assert job is not None and job.get("id_base64") == b64(raw) and "id" not in job, job


def test_reserve_touch_release_ack_by_the_ids_bytes(layout: Any, redis_server: Any) -> None:
    server, r, topic = layout[1], redis_server.client(), f"raw-{uuid.uuid4().hex[:8]}"
    raw, path = plant(layout, r, topic)
    named(ok(server, "GET", path), raw)
    assert ok(server, "GET", path)["state"] == "scheduled"
    assert ok(server, "POST", f"{path}/reschedule", {"delay": 0})["due"] is not None
    got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    named(got, raw)
    assert ok(server, "GET", path)["state"] == "reserved"
    assert ok(server, "POST", f"{path}/touch", {"receipt": got["receipt"], "ttr": 60})["deadline"] is not None
    assert ok(server, "POST", f"{path}/release", {"receipt": got["receipt"], "delay": 0})["released"] is True
    again = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    named(again, raw)
    assert ok(server, "POST", f"{path}/ack", {"receipt": again["receipt"]})["acked"] is True
    assert ok(server, "GET", path)["state"] == "unknown"


def test_pop_and_remove_by_the_ids_bytes(layout: Any, redis_server: Any) -> None:
    server, r, topic = layout[1], redis_server.client(), f"raw-{uuid.uuid4().hex[:8]}"
    raw, path = plant(layout, r, topic)
    assert ok(server, "POST", f"{path}/reschedule", {"delay": 0})["due"] is not None
    named(ok(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 10})["job"], raw)
    assert ok(server, "GET", path)["state"] == "unknown"

    raw, path = plant(layout, r, topic)
    assert ok(server, "DELETE", path)["removed"] is True
    assert ok(server, "GET", path)["state"] == "unknown"
    assert ok(server, "DELETE", path)["removed"] is False


def test_dead_letters_requeued_and_purged_by_ids_base64(layout: Any, redis_server: Any) -> None:
    server, r, topic = layout[1], redis_server.client(), f"raw-{uuid.uuid4().hex[:8]}"
    raw, path = plant(layout, r, topic)
    dead = f"/v1/topics/{topic}/dead"

    def bury() -> None:
        got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
        named(got, raw)
        assert ok(server, "POST", f"{path}/bury", {"receipt": got["receipt"], "error": "no"})["buried"] is True
        letters = ok(server, "GET", dead)["dead"]
        assert len(letters) == 1
        named(letters[0], raw)

    assert ok(server, "POST", f"{path}/reschedule", {"delay": 0})["due"] is not None
    bury()
    # A text id of the same bytes' lossy decoding names nothing.
    assert ok(server, "POST", f"{dead}/requeue", {"ids": [raw.decode("utf-8", "replace")]})["requeued"] == 0
    assert ok(server, "POST", f"{dead}/requeue", {"ids_base64": [b64(raw)]})["requeued"] == 1
    bury()
    assert ok(server, "POST", f"{dead}/purge", {"ids": ["other"], "ids_base64": [b64(raw)]})["purged"] == 1
    assert ok(server, "GET", dead)["dead"] == []
    assert ok(server, "GET", path)["state"] == "unknown"


def test_bad_names_and_lists_are_400s(layout: Any) -> None:
    server = layout[1]
    for method, route, body in [
        ("GET", "/v1/topics/%FF/jobs?state=ready", None),
        ("GET", "/v1/topics/%FF/jobs/1", None),
        ("POST", "/v1/topics/%FF%FE/reserve", {"ttr": 1}),
        ("POST", "/v1/topics/%C3/dead/purge", {"all": True}),
    ]:
        got, data, _ = request(server.base, method, route, body)
        assert got == 400 and "topic in the path is not UTF-8" in data["error"]["message"], (route, got, data)
    dead = "/v1/topics/t/dead/purge"
    for body, words in [
        ({"ids_base64": ["not base64!"]}, "ids_base64[0] is not base64"),
        ({"ids_base64": [], "all": True}, "not both"),
        ({}, "ids_base64"),
    ]:
        got, data, _ = request(server.base, "POST", dead, body)
        assert got == 400 and words in data["error"]["message"], (body, got, data)
