"""Trace context across SDKs (issue 22): a job pushed with a ``traceparent``
by one SDK (push or push_many) is handed to another's pop, bpop and reserve
with the same value, and its lookup shows it; a job pushed without one by
any client, Delayer 1.x's included, is handed out with none. The real
server moves the jobs. Malformed values: test_conformance_rejections.py."""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any, Dict, Optional

import pytest

from conftest import LAYOUT

SDKS = ["rust", "python", "php"]
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
_SESSION = uuid.uuid4().hex[:8]
DEADLINE_S = 10.0


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """The real server moves the jobs."""


def ok(drivers: Any, who: str, req: Dict[str, Any]) -> Dict[str, Any]:
    answer = drivers[who].request(req)
    assert answer["ok"] is True, f"{req['op']} by {who}: {answer.get('error')}"
    return answer


def consume(drivers: Any, who: str, topic: str, how: str) -> Dict[str, Any]:
    """The next job of ``topic`` by ``how`` (pop, bpop, reserve), within the deadline."""
    end = time.monotonic() + DEADLINE_S
    job: Optional[Dict[str, Any]] = None
    while job is None and time.monotonic() < end:
        if how == "bpop":
            job = ok(drivers, who, {"op": "bpop", "topic": topic, "timeout_ms": 1000})["job"]
        elif how == "reserve":
            job = ok(drivers, who, {"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
        else:
            job = ok(drivers, who, {"op": "pop", "topic": topic})["job"]
        if job is None:
            time.sleep(0.02)
    assert job is not None, f"{who} ({how}) got nothing from {topic}"
    return job


@pytest.mark.parametrize("x,y", list(itertools.product(SDKS, SDKS)), ids=lambda v: str(v))
def test_the_traceparent_pushed_by_one_sdk_reaches_another(drivers: Any, x: str, y: str) -> None:
    topic = f"trace-{_SESSION}-{x}-{y}"
    ok(drivers, x, {"op": "push", "topic": topic, "id": "single", "delay_ms": 0, "body_b64": "", "traceparent": TP})
    assert ok(drivers, y, {"op": "job", "topic": topic, "id": "single"})["job"]["traceparent"] == TP
    ok(drivers, x, {"op": "push_many", "if_absent": False, "jobs": [
        {"topic": topic, "id": "many", "delay_ms": 0, "body_b64": "", "traceparent": TP},
        {"topic": topic, "id": "none", "delay_ms": 0, "body_b64": ""},
    ]})
    seen = {}
    for how in ("pop", "bpop", "reserve"):
        job = consume(drivers, y, topic, how)
        seen[job["id"]] = job["traceparent"]
    assert seen == {"single": TP, "many": TP, "none": None}, f"{x} -> {y}"


@pytest.mark.skipif(LAYOUT == "topic", reason="Delayer 1.x writes the classic layout only")
@pytest.mark.parametrize("y", SDKS)
def test_a_delayer_1x_job_has_none(drivers: Any, y: str) -> None:
    topic = f"trace-{_SESSION}-raw1x-{y}"
    ok(drivers, "raw1x", {"op": "push", "topic": topic, "id": "old", "delay_ms": 0, "body_b64": "aGk="})
    job = consume(drivers, y, topic, "pop")
    assert (job["id"], job["traceparent"]) == ("old", None)


@pytest.mark.skipif(LAYOUT == "topic", reason="Delayer 1.x reads the classic layout only")
@pytest.mark.parametrize("x", SDKS)
def test_a_delayer_1x_consumer_reads_a_job_pushed_with_one(drivers: Any, x: str) -> None:
    topic = f"trace-{_SESSION}-{x}-raw1x"
    ok(drivers, x, {"op": "push", "topic": topic, "id": "new", "delay_ms": 0, "body_b64": "aGk=", "traceparent": TP})
    job = consume(drivers, "raw1x", topic, "pop")
    assert (job["id"], job["topic"], job["body_b64"]) == ("new", topic, "aGk="), "the extra field costs 1.x nothing"
