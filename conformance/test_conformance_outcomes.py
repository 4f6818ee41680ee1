"""Ended reservations are counted per topic and outcome in Redis, by the
scripts (docs/PROTOCOL.md, the outcomes hash), so every SDK counts alike with
no code of its own and the server exports the counts as
``delayer_jobs_{acked,released,buried,dead_lettered}_total{topic}``.

Each SDK acks, releases, buries and exhausts jobs; the real server expires
one; the hash must say exactly that, in either layout (the per-topic layout
keeps one hash per topic, in the topic's hash slot).
"""

from __future__ import annotations

import uuid
from typing import Any, Dict

import pytest

from conftest import LAYOUT, PREFIX
from harness import new_id, ok, wait_until

SDKS = ["rust", "python", "php"]
_SESSION = uuid.uuid4().hex[:8]
OUTCOMES = ("acked", "released", "buried", "dead_lettered")


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """Moves and expiry are the server's work."""


def outcomes(rds: Any, t: str) -> Dict[str, int]:
    """The counts of topic ``t``, by outcome (0 when absent)."""
    key = PREFIX + ("{" + t + "}:outcomes" if LAYOUT == "topic" else "outcomes")
    return {kind: int(rds.hget(key, f"{kind}:{t}") or 0) for kind in OUTCOMES}


def push(drivers: Any, who: str, t: str, job_id: str, **extra: Any) -> None:
    ok(drivers, who, {"op": "push", "topic": t, "id": job_id, "delay_ms": 0, "body_b64": "", **extra})


def reserve(drivers: Any, who: str, t: str, ttr_ms: int = 30_000) -> Dict[str, Any]:
    job: Dict[str, Any] = ok(drivers, who, {"op": "breserve", "topic": t, "ttr_ms": ttr_ms, "timeout_ms": 10_000})["job"]
    assert job is not None, f"{who} reserved nothing on {t}"
    return job


def end(drivers: Any, who: str, op: str, job: Dict[str, Any], **extra: Any) -> None:
    req = {"op": op, "id": job["id"], "receipt": job["receipt"], "topic": job["topic"], **extra}
    assert ok(drivers, who, req)["done"] is True, f"{who} {op} {job['id']}"


@pytest.mark.parametrize("who", SDKS)
def test_each_sdk_counts_acks_retries_buries_and_dead_letters(drivers: Any, rds: Any, who: str) -> None:
    t = f"oc-{_SESSION}-{who}"
    for name in ("a", "r", "b", "x"):
        # x may be reserved once: its release sends it to dead letters
        push(drivers, who, t, new_id(name), **({"max_attempts": 1} if name == "x" else {}))
    for _ in range(4):
        job = reserve(drivers, who, t)
        kind = job["id"].split(":")[0]
        if kind == "a":
            end(drivers, who, "ack", job)
        elif kind == "b":
            end(drivers, who, "bury", job)
        else:
            end(drivers, who, "release", job, delay_ms=60_000)
    assert outcomes(rds, t) == {"acked": 1, "released": 1, "buried": 1, "dead_lettered": 2}
    # An ack that holds nothing counts nothing.
    assert ok(drivers, who, {"op": "ack", "id": "none", "receipt": None, "topic": t})["done"] is False
    assert outcomes(rds, t)["acked"] == 1


def test_the_servers_expiry_counts_a_retry_then_a_dead_letter(drivers: Any, rds: Any) -> None:
    t = f"oc-{_SESSION}-expiry"
    push(drivers, "python", t, new_id("e"), max_attempts=2, backoff={"kind": "fixed", "delay_ms": 50})
    reserve(drivers, "python", t, ttr_ms=100)
    assert wait_until(lambda: outcomes(rds, t)["released"] == 1), "the expired reservation was not retried"
    reserve(drivers, "rust", t, ttr_ms=100)
    assert wait_until(lambda: outcomes(rds, t)["dead_lettered"] == 1), "the second expiry did not dead-letter"
    assert outcomes(rds, t) == {"acked": 0, "released": 1, "buried": 0, "dead_lettered": 1}
