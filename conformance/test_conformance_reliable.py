"""The at-least-once mode (docs/PROTOCOL.md, "Reserve and ack") is one
semantics in three SDKs: a job pushed by any client is reserved by any SDK,
ended or touched by any other with the receipt, expired by the real server
and handed out again, retried with the same backoff, and its dead letter
listed, re-queued and purged alike. The same bad input is refused by all three.
"""

from __future__ import annotations

import base64
import itertools
import uuid
from typing import Any, Dict, List, Optional

import pytest

from conftest import LAYOUT, PREFIX
from harness import new_id, ok, wait_until
from harness import redis_now as now

SDKS = ["rust", "python", "php"]
PRODUCERS = SDKS + ["raw1x"]
_SESSION = uuid.uuid4().hex[:8]
WAIT_MS = 10_000
#: A fast fixed backoff, so a retry is due at once.
FAST = {"kind": "fixed", "delay_ms": 50}


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """Expiry of reservations is the server's work."""


def topic(*parts: str) -> str:
    return "rl-" + _SESSION + "-" + "-".join(parts)




def push(drivers: Any, who: str, t: str, job_id: str, body: bytes = b"", **retry: Any) -> None:
    req = {"op": "push", "topic": t, "id": job_id, "delay_ms": 0, "body_b64": base64.b64encode(body).decode()}
    req.update(retry)
    ok(drivers, who, req)


def breserve(drivers: Any, who: str, t: str, ttr_ms: int = 30_000, timeout_ms: int = WAIT_MS) -> Optional[Dict[str, Any]]:
    job: Optional[Dict[str, Any]] = ok(
        drivers, who, {"op": "breserve", "topic": t, "ttr_ms": ttr_ms, "timeout_ms": timeout_ms}
    )["job"]
    return job


def end(drivers: Any, who: str, op: str, job: Dict[str, Any], receipt: bool = True, **extra: Any) -> bool:
    req = {"op": op, "id": job["id"], "receipt": job["receipt"] if receipt else None, "topic": job["topic"]}
    req.update(extra)
    done: bool = ok(drivers, who, req)["done"]
    return done



# ------------------------------------------------------------ reserve / ack


@pytest.mark.parametrize("x,y", list(itertools.product(PRODUCERS, SDKS)), ids=lambda v: str(v))
def test_reserve_then_ack_with_another_sdk(drivers: Any, rds: Any, keys: Any, x: str, y: str) -> None:
    """x pushes, y reserves, the next SDK acks with y's receipt."""
    t = topic("ack", x, y)
    job_id = new_id(x)
    body = bytes(range(256))
    push(drivers, x, t, job_id, body)
    job = breserve(drivers, y, t)
    assert job is not None, f"{y} reserved nothing pushed by {x}"
    assert (job["id"], job["topic"], base64.b64decode(job["body_b64"])) == (job_id, t, body)
    assert (job["attempts"], job["max_attempts"]) == (1, 25), "first attempt, the default limit"
    deadline = rds.zscore(keys.reserved_of(t), job_id)  # Unix ms
    assert deadline is not None and abs(deadline / 1000 - job["deadline"]) < 0.002
    assert rds.ttl(keys.bucket(job_id, t)) == -1, "a reserved job is kept until acked"
    assert breserve(drivers, y, t, timeout_ms=200) is None, "a reserved job is invisible"

    acker = SDKS[(SDKS.index(y) + 1) % 3]
    assert end(drivers, acker, "ack", dict(job, receipt="0")) is False, "a wrong receipt acks nothing"
    assert end(drivers, acker, "ack", job) is True
    assert rds.exists(keys.bucket(job_id, t)) == 0
    assert end(drivers, y, "ack", job) is False, "a second ack finds nothing"


@pytest.mark.parametrize("y", SDKS)
def test_touch_keeps_a_reservation_from_the_server(drivers: Any, rds: Any, keys: Any, y: str) -> None:
    """y reserves for 1.5 s, z extends it with y's receipt: the server leaves
    it alone past the first deadline; w shortens it and the server takes it
    back on the new deadline."""
    z = SDKS[(SDKS.index(y) + 1) % 3]
    w = SDKS[(SDKS.index(y) + 2) % 3]
    t = topic("touch", y)
    job_id = new_id(y)
    push(drivers, y, t, job_id)
    # Long enough for z's driver to start (its first call in a run can take
    # half a second on a loaded machine).
    first = breserve(drivers, y, t, ttr_ms=1500)
    assert first is not None
    before = now(rds)
    touch = {"op": "touch", "id": job_id, "topic": t}
    deadline = ok(drivers, z, {**touch, "receipt": first["receipt"], "ttr_ms": 30_000})["deadline"]
    assert deadline is not None and abs(deadline - (before + 30)) < 1.0
    assert abs(rds.zscore(keys.reserved_of(t), job_id) / 1000 - deadline) < 0.002
    # Well past the first deadline and several server ticks: still held.
    assert breserve(drivers, w, t, timeout_ms=2500) is None, "a touched reservation was handed out again"
    assert rds.hget(keys.bucket(job_id, t), "attempts") == b"1", "a touch is not an attempt"

    shorter = ok(drivers, w, {**touch, "receipt": None, "ttr_ms": 200})["deadline"]
    assert shorter is not None and shorter < deadline, "touch sets the deadline, it does not add to it"
    if LAYOUT == "topic":
        # The index must hear of the deadline brought in (touch.lua announces
        # it; the server writes it at its next tick), or the server would
        # expire it only at the index's later time (or by its sweep).
        def indexed() -> bool:
            entry = rds.zscore(PREFIX + "due", t)
            held = rds.zscore(keys.reserved_of(t), job_id) is not None
            return not held or (entry is not None and entry <= shorter + 0.002)
        assert wait_until(indexed, 5), \
            f"the touch left the index at {rds.zscore(PREFIX + 'due', t)}, after the deadline {shorter}"
    second = breserve(drivers, w, t)
    assert second is not None and second["attempts"] == 2, "the server expires on the touched deadline"
    stale = ok(drivers, z, {**touch, "receipt": first["receipt"], "ttr_ms": 30_000})
    assert stale["deadline"] is None, "an expired reservation cannot be touched"
    assert end(drivers, y, "ack", second) is True


# ------------------------------------------------------ expiry, retries, dead


@pytest.mark.parametrize("y", SDKS)
def test_expiry_retries_and_dead_letters_across_sdks(drivers: Any, rds: Any, keys: Any, y: str) -> None:
    z = SDKS[(SDKS.index(y) + 1) % 3]
    w = SDKS[(SDKS.index(y) + 2) % 3]
    t = topic("expire", y)
    job_id = new_id(y)
    push(drivers, y, t, job_id, b"payload", max_attempts=2, backoff=FAST)

    first = breserve(drivers, y, t, ttr_ms=300)
    assert first is not None and first["attempts"] == 1
    # y "dies": the server ends the reservation and z gets the job again.
    second = breserve(drivers, z, t, ttr_ms=30_000)
    assert second is not None, f"the job never came back to {z} after {y}'s ttr"
    assert (second["id"], second["attempts"]) == (job_id, 2)
    assert second["receipt"] != first["receipt"]
    assert end(drivers, y, "ack", first) is False, "the expired reservation is not held any more"

    # The last attempt fails: dead letter, seen alike by all three.
    assert end(drivers, w, "release", second, delay_ms=0) is True
    assert rds.zscore(keys.pool_of(t), job_id) is None
    listings = [ok(drivers, s, {"op": "dead_list", "topic": t, "start": 0, "count": 10})["dead"] for s in SDKS]
    assert listings[0] == listings[1] == listings[2], f"SDKs list dead letters differently: {listings}"
    (entry,) = listings[0]
    assert (entry["id"], entry["reason"], entry["attempts"]) == (job_id, "max_attempts", 2)
    # The last failed attempt said nothing; the one before ran out of time.
    assert entry["last_error"] == "ttr expired", entry
    assert base64.b64decode(entry["body_b64"]) == b"payload"

    assert ok(drivers, z, {"op": "requeue_dead", "topic": t, "ids": [job_id]})["count"] == 1
    again = breserve(drivers, w, t)
    assert again is not None and again["attempts"] == 1, "a re-queued job starts its attempts again"
    assert end(drivers, y, "bury", again, receipt=False) is True, "bury by id, without the receipt"
    (entry,) = ok(drivers, z, {"op": "dead_list", "topic": t, "start": 0, "count": 10})["dead"]
    assert entry["reason"] == "buried"
    assert ok(drivers, w, {"op": "purge_dead", "topic": t, "ids": None})["count"] == 1
    assert rds.exists(keys.bucket(job_id, t)) == 0
    assert ok(drivers, y, {"op": "dead_list", "topic": t, "start": 0, "count": 10})["dead"] == []


# ------------------------------------------------------- the same bytes in Redis


def test_retry_settings_are_written_alike(drivers: Any, rds: Any, keys: Any) -> None:
    settings: List[Dict[str, Any]] = [
        {"max_attempts": 7, "backoff": {"kind": "exponential", "base_ms": 1500, "max_ms": 60_000}},
        {"max_attempts": 0, "backoff": {"kind": "fixed", "delay_ms": 250}},
        {},
    ]
    for n, retry in enumerate(settings):
        buckets = []
        for s in SDKS:
            job_id = new_id(f"fields{n}-{s}")
            t = topic("fields")
            ok(drivers, s, {"op": "push", "topic": t, "id": job_id, "delay_ms": 600_000, **retry})
            fields = {k.decode(): v.decode() for k, v in rds.hgetall(keys.bucket(job_id, t)).items()}
            if LAYOUT == "topic":
                # the per-topic bucket keeps its due time (the ready-queue age reads it): the pool score
                assert float(fields.pop("due")) == rds.zscore(keys.pool_of(t), job_id)
            buckets.append(fields)
            ok(drivers, s, {"op": "remove", "id": job_id, "topic": t})
        assert buckets[0] == buckets[1] == buckets[2], f"{retry}: {buckets}"
    assert set(buckets[0]) == {"topic", "body"}, "without retry settings the bucket is Delayer 1.x's"


@pytest.mark.parametrize("y", SDKS)
def test_release_waits_the_delay_or_the_backoff(drivers: Any, rds: Any, keys: Any, y: str) -> None:
    t = topic("release", y)
    job_id = new_id(y)
    push(drivers, y, t, job_id, backoff={"kind": "exponential", "base_ms": 10_000, "max_ms": 30_000})
    job = breserve(drivers, y, t)
    assert job is not None
    before = now(rds)
    assert end(drivers, y, "release", job, delay_ms=45_000) is True
    assert abs(rds.zscore(keys.pool_of(t), job_id) - (before + 45)) < 1.0, "the given delay"
    # Bring it back at once, then fail it twice more by its backoff.
    waits = []
    for _ in range(2):
        assert ok(drivers, y, {"op": "reschedule", "id": job_id, "topic": t, "delay_ms": 0})["due"] is not None
        job = breserve(drivers, y, t)
        assert job is not None
        before = now(rds)
        assert end(drivers, y, "release", job, receipt=False) is True
        waits.append(round(rds.zscore(keys.pool_of(t), job_id) - before))
    assert waits == [20, 30], f"10 s doubled per attempt (2nd: 20 s, 3rd: 40 s) capped at 30 s, got {waits}"
    ok(drivers, y, {"op": "remove", "id": job_id, "topic": t})


def test_default_retry_settings_apply_without_being_written(drivers: Any, rds: Any, keys: Any) -> None:
    """A job pushed without retry settings: reserve writes only attempts and
    receipt, and every release, whichever SDK sends it, waits the default
    backoff (1 s doubling) and buries the job at the default 25th attempt,
    the limit reserve's reply names (release.lua and reserve.lua agree)."""
    t = topic("defaults")
    job_id = new_id("defaults")
    push(drivers, "python", t, job_id)
    waits, outcome = [], None
    for attempt in range(1, 26):
        s = SDKS[attempt % 3]
        job = breserve(drivers, s, t)
        assert job is not None and (job["attempts"], job["max_attempts"]) == (attempt, 25), job
        if attempt <= 3:  # once by each SDK
            fields = {k.decode() for k in rds.hkeys(keys.bucket(job_id, t))} - {"due"}
            assert fields == {"topic", "body", "attempts", "receipt"}, f"reserve wrote defaults: {fields}"
        before = now(rds)
        assert end(drivers, s, "release", job) is True
        due = rds.zscore(keys.pool_of(t), job_id)
        if due is None:
            outcome = attempt
            break
        waits.append(round(due - before))
        assert ok(drivers, s, {"op": "reschedule", "id": job_id, "topic": t, "delay_ms": 0})["due"] is not None
    assert waits[:4] == [1, 2, 4, 8], f"the default backoff: 1 s doubling, got {waits[:4]}"
    assert max(waits) == 3600, "the default cap: 1 h"
    assert outcome == 25, "the default limit: dead at the 25th attempt"
    (entry,) = ok(drivers, "rust", {"op": "dead_list", "topic": t, "start": 0, "count": 10})["dead"]
    assert (entry["id"], entry["reason"], entry["attempts"]) == (job_id, "max_attempts", 25)
    ok(drivers, "rust", {"op": "purge_dead", "topic": t, "ids": None})


@pytest.mark.parametrize("y", SDKS)
def test_reschedule_moves_only_waiting_jobs(drivers: Any, rds: Any, keys: Any, y: str) -> None:
    job_id, t = new_id(y), topic("resched")
    ok(drivers, y, {"op": "push", "topic": t, "id": job_id, "delay_ms": 600_000})
    before = now(rds)
    due = ok(drivers, y, {"op": "reschedule", "id": job_id, "topic": t, "delay_ms": 120_000})["due"]
    assert due is not None and abs(due - (before + 120)) < 1.0
    assert abs(rds.zscore(keys.pool_of(t), job_id) - due) < 0.002
    assert ok(drivers, y, {"op": "reschedule", "id": new_id("nobody"), "topic": t, "delay_ms": 0})["due"] is None
    ok(drivers, y, {"op": "remove", "id": job_id, "topic": t})
    assert ok(drivers, y, {"op": "reschedule", "id": job_id, "topic": t, "delay_ms": 0})["due"] is None, \
        "never resurrected"
    assert rds.zscore(keys.pool_of(t), job_id) is None


# ------------------------------------------------------------ rejections

BAD = [
    ("ttr 0", {"op": "reserve", "topic": "t", "ttr_ms": 0}),
    ("ttr over 10 years", {"op": "reserve", "topic": "t", "ttr_ms": 315_360_000_001}),
    ("breserve ttr 0", {"op": "breserve", "topic": "t", "ttr_ms": 0, "timeout_ms": 10}),
    ("reserve empty topic", {"op": "reserve", "topic": "", "ttr_ms": 1000}),
    ("max_attempts -1", {"op": "push", "topic": "t", "id": "x", "delay_ms": 0, "max_attempts": -1}),
    ("max_attempts 1000001", {"op": "push", "topic": "t", "id": "x", "delay_ms": 0, "max_attempts": 1_000_001}),
    ("backoff cap below base", {"op": "push", "topic": "t", "id": "x", "delay_ms": 0,
                                "backoff": {"kind": "exponential", "base_ms": 2000, "max_ms": 1000}}),
    ("fixed backoff over 10 years", {"op": "push", "topic": "t", "id": "x", "delay_ms": 0,
                                     "backoff": {"kind": "fixed", "delay_ms": 315_360_000_001}}),
    ("ack empty id", {"op": "ack", "id": "", "receipt": None}),
    ("ack empty receipt", {"op": "ack", "id": "x", "receipt": ""}),
    ("touch ttr 0", {"op": "touch", "id": "x", "receipt": None, "ttr_ms": 0}),
    ("touch empty receipt", {"op": "touch", "id": "x", "receipt": "", "ttr_ms": 1000}),
    ("backoff cap below base after rounding", {"op": "push", "topic": "t", "id": "x", "delay_ms": 0,
                                               "backoff": {"kind": "exponential", "base_ms": 2, "max_ms": 1}}),
    ("release empty id", {"op": "release", "id": "", "receipt": None, "delay_ms": None}),
    ("release delay over 10 years", {"op": "release", "id": "x", "receipt": None, "delay_ms": 315_360_000_001}),
    ("reschedule delay over 10 years", {"op": "reschedule", "id": "x", "delay_ms": 315_360_000_001}),
    ("dead_list count 0", {"op": "dead_list", "topic": "t", "start": 0, "count": 0}),
    ("dead_list count 1001", {"op": "dead_list", "topic": "t", "start": 0, "count": 1001}),
    ("requeue empty id", {"op": "requeue_dead", "topic": "t", "ids": ["ok", ""]}),
]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name,req", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_alike(drivers: Any, rds: Any, sdk: str, name: str, req: Dict[str, Any]) -> None:
    req = dict(req)
    if req.get("topic") == "t":
        req["topic"] = topic("reject")
    before = rds.dbsize()
    r = drivers[sdk].request(req)
    assert r["ok"] is False and r["error"].startswith("invalid_argument:"), f"{sdk} {name}: {r}"
    assert rds.dbsize() == before, f"{sdk} {name}: wrote to Redis"
