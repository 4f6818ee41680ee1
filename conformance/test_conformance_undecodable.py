"""No SDK destroys a job it cannot decode (issue 20, item 11).

A Delayer 1.x or PHP client writes any bytes as a job id, and bodies are
bytes: a job whose id and body are not UTF-8, pushed by each writer that
can write one (raw1x, php, python), is moved by the real server and handed
out whole by each SDK (``id_b64``, the id's exact bytes, in the line
protocol): popped (the job behind it too: nothing stalls), and reserved,
touched, released, buried, listed as a dead letter, re-queued and acked by
its id, every step by the consumer that got it. Rust writes ids as text
(``Job::new`` takes a String), so it pushes only the bodies.

Runs in both layouts (test.sh runs it again with CONFORMANCE_LAYOUT=topic;
raw1x then sits out, as a 1.x client cannot write that layout).
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any, Dict, List, Optional

import pytest

from harness import ok

CONSUMERS = ["rust", "python", "php"]
WRITERS = ["raw1x", "php", "python"]
_SESSION = uuid.uuid4().hex[:8]
WAIT_S = 10.0
BODY = b"\xff\xfe not UTF-8 \xe9"


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """The real server moves every job here."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def bad_id(tag: str) -> bytes:
    """An id that is not UTF-8 (a Latin-1 é, a lone continuation byte, a cut sequence), unique to ``tag``."""
    return f"{tag}-{uuid.uuid4().hex[:8]}-".encode() + b"\xe9\x80\xe2\x82"


def take(drivers: Any, who: str, op: str, topic: str, **extra: Any) -> Dict[str, Any]:
    """One job of ``topic`` taken with ``op``, polling up to WAIT_S."""
    end = time.monotonic() + WAIT_S
    while True:
        job: Optional[Dict[str, Any]] = ok(drivers, who, dict({"op": op, "topic": topic}, **extra))["job"]
        if job is not None:
            return job
        assert time.monotonic() < end, f"{who} {op} got nothing of {topic!r}"
        time.sleep(0.02)


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_a_job_whose_id_is_not_utf8_is_popped_whole_and_does_not_stall_its_topic(
    drivers: Any, writer: str, consumer: str
) -> None:
    t = f"undecodable pop {writer} {consumer} {_SESSION}"
    first, second = bad_id("first"), bad_id("second")
    for job_id in (first, second):
        ok(drivers, writer, {"op": "push", "topic": t, "id_b64": b64(job_id), "delay_ms": 0, "body_b64": b64(BODY)})
    ok(drivers, writer, {"op": "push", "topic": t, "id": "plain", "delay_ms": 0, "body_b64": b64(b"fine")})
    got: List[Dict[str, Any]] = [take(drivers, consumer, "pop", t)]
    got.append(take(drivers, consumer, "bpop", t, timeout_ms=2000))
    got.append(take(drivers, consumer, "pop", t))
    assert sorted(base64.b64decode(j["id_b64"]) for j in got) == sorted([first, second, b"plain"])
    for j in got:
        assert j["topic"] == t
        assert base64.b64decode(j["body_b64"]) == (b"fine" if j["id_b64"] == b64(b"plain") else BODY), j
    assert ok(drivers, consumer, {"op": "pop", "topic": t})["job"] is None


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_the_consumer_that_got_it_ends_it_by_what_it_got(drivers: Any, keys: Any, writer: str, consumer: str) -> None:
    t = f"undecodable reserve {writer} {consumer} {_SESSION}"
    job_id = bad_id("held")
    ok(drivers, writer, {"op": "push", "topic": t, "id_b64": b64(job_id), "delay_ms": 0, "body_b64": b64(BODY)})
    c = consumer

    def holding(job: Dict[str, Any]) -> Dict[str, Any]:
        return {"id_b64": job["id_b64"], "receipt": job["receipt"], **keys.named(t)}

    job = take(drivers, c, "reserve", t, ttr_ms=60_000)
    assert base64.b64decode(job["id_b64"]) == job_id and base64.b64decode(job["body_b64"]) == BODY
    assert ok(drivers, c, {"op": "touch", **holding(job), "ttr_ms": 60_000})["deadline"] is not None
    looked = ok(drivers, c, {"op": "job", "topic": t, "id_b64": job["id_b64"]})["job"]
    assert (looked["state"], looked["id_base64"]) == ("reserved", job["id_b64"])  # `delayer job --json`'s shape
    assert ok(drivers, c, {"op": "release", **holding(job), "delay_ms": 0})["done"] is True
    again = take(drivers, c, "breserve", t, ttr_ms=60_000, timeout_ms=2000)
    assert again["id_b64"] == job["id_b64"] and again["attempts"] == 2
    assert ok(drivers, c, {"op": "bury", **holding(again)})["done"] is True
    dead = ok(drivers, c, {"op": "dead_list", "topic": t, "start": 0, "count": 10})["dead"]
    assert [d["id_b64"] for d in dead] == [job["id_b64"]]
    assert ok(drivers, c, {"op": "requeue_dead", "topic": t, "ids_b64": [job["id_b64"]]})["count"] == 1
    third = take(drivers, c, "reserve", t, ttr_ms=60_000)
    assert third["id_b64"] == job["id_b64"]
    assert ok(drivers, c, {"op": "ack", **holding(third)})["done"] is True
    assert ok(drivers, c, {"op": "job", "topic": t, "id_b64": job["id_b64"]})["job"]["state"] == "unknown"
    # A dead letter purged by its id, and a waiting job removed by its id.
    ok(drivers, writer, {"op": "push", "topic": t, "id_b64": b64(job_id), "delay_ms": 0, "body_b64": b64(BODY)})
    fourth = take(drivers, c, "reserve", t, ttr_ms=60_000)
    assert ok(drivers, c, {"op": "bury", **holding(fourth)})["done"] is True
    assert ok(drivers, c, {"op": "purge_dead", "topic": t, "ids_b64": [job["id_b64"]]})["count"] == 1
    ok(drivers, writer, {"op": "push", "topic": t, "id_b64": b64(job_id), "delay_ms": 600_000, "body_b64": b64(BODY)})
    removed = ok(drivers, c, {"op": "remove", "id_b64": job["id_b64"], **keys.named(t)})["removed"]
    assert removed is True
    assert ok(drivers, c, {"op": "job", "topic": t, "id_b64": job["id_b64"]})["job"]["state"] == "unknown"


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_rust_pushes_bodies_that_are_not_utf8_for_every_consumer(drivers: Any, consumer: str) -> None:
    t = f"undecodable rust body {consumer} {_SESSION}"
    ok(drivers, "rust", {"op": "push", "topic": t, "id": "binary", "delay_ms": 0, "body_b64": b64(BODY)})
    job = take(drivers, consumer, "pop", t)
    assert (base64.b64decode(job["id_b64"]), base64.b64decode(job["body_b64"])) == (b"binary", BODY)


def test_rust_says_it_cannot_push_an_id_that_is_not_utf8(drivers: Any) -> None:
    r = drivers["rust"].request({"op": "push", "topic": "t", "id_b64": b64(b"\xff"), "delay_ms": 0})
    assert r["ok"] is False and r["error"].startswith("invalid_argument: driver:")

