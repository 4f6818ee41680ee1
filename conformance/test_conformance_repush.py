"""Pushing an id again (docs/PROTOCOL.md, "push" and "Stale entries").

Ids are global in the classic layout, so a push under a taken id replaces
the job, on any topic: Delayer 1.x's behaviour and still the default. Two
promises hold whoever pushes and whoever consumes:

- the newer job never leaves before its own due time: a ready-queue entry or
  a reservation left by the earlier push is stale, and pop, bpop, reserve,
  breserve, ack and the server's expiry all treat it so (also when the
  re-push is a Delayer 1.x client's raw HMSET + ZADD, which keeps the old
  bucket's fields);
- with "if absent" a push never replaces: nothing is written, and the caller
  learns the topic and due time of the job holding the id, in every SDK.

In the per-topic layout (CONFORMANCE_LAYOUT=topic) ids are per topic, so an
id is taken, and pushed again, on its own topic only: the same id on another
topic is another job. A Delayer 1.x client (raw1x) cannot write that layout:
its cases are skipped, and where it only puts a job in place an SDK does.
"""

from __future__ import annotations

import base64
import itertools
import uuid
from typing import Any, Dict, List, Optional

import pytest

from conftest import LAYOUT
from harness import new_id, ok, wait_until
from harness import redis_now as now

SDKS = ["rust", "python", "php"]
PRODUCERS = SDKS + ["raw1x"]
_SESSION = uuid.uuid4().hex[:8]
LATER_MS = 100_000
#: Who puts a job in place for a test of somebody else: a 1.x client where
#: the layout lets it.
SETTER = "raw1x" if LAYOUT == "classic" else "python"


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """The server moves the first push to its ready queue and expires reservations."""


def topic(*parts: str) -> str:
    return "rp-" + _SESSION + "-" + "-".join(parts)




def push(drivers: Any, who: str, t: str, job_id: str, delay_ms: int, body: bytes, **extra: Any) -> Dict[str, Any]:
    req = {"op": "push", "topic": t, "id": job_id, "delay_ms": delay_ms, "body_b64": base64.b64encode(body).decode()}
    req.update(extra)
    return ok(drivers, who, req)



def wait_ready(rds: Any, keys: Any, t: str, job_id: str) -> None:
    assert wait_until(lambda: job_id.encode() in rds.lrange(keys.ready(t), 0, -1)), f"{job_id} never became ready"


def assert_waits_later(rds: Any, keys: Any, t: str, job_id: str, body: bytes) -> None:
    """The newer job is untouched: in the pool, due well ahead, its own body."""
    score = rds.zscore(keys.pool_of(t), job_id)
    assert score is not None, f"{job_id} left the pool before its due time"
    assert score > now(rds) + LATER_MS / 1000 - 30, f"{job_id} due at {score}, sooner than pushed"
    assert rds.hget(keys.bucket(job_id, t), "body") == body


CONSUME = {
    "pop": lambda t: {"op": "pop", "topic": t},
    "bpop": lambda t: {"op": "bpop", "topic": t, "timeout_ms": 300},
    "reserve": lambda t: {"op": "reserve", "topic": t, "ttr_ms": 30_000},
    "breserve": lambda t: {"op": "breserve", "topic": t, "ttr_ms": 30_000, "timeout_ms": 300},
}


@pytest.mark.parametrize(
    "repusher,consumer,how", list(itertools.product(PRODUCERS, SDKS, CONSUME)), ids=lambda v: str(v)
)
def test_a_stale_ready_entry_does_not_carry_the_newer_job_out_early(
    drivers: Any, rds: Any, keys: Any, repusher: str, consumer: str, how: str
) -> None:
    t = topic("ready", repusher, consumer, how)
    job_id = new_id(repusher)
    push(drivers, "python", t, job_id, 0, b"first")
    wait_ready(rds, keys, t, job_id)
    push(drivers, repusher, t, job_id, LATER_MS, b"second")
    got = ok(drivers, consumer, CONSUME[how](t))["job"]
    assert got is None, f"{consumer} {how} handed out {got['id']} (re-pushed by {repusher}) before its due time"
    assert_waits_later(rds, keys, t, job_id, b"second")
    assert rds.llen(keys.ready(t)) == 0, "the stale entry should be dropped, not left behind"


@pytest.mark.parametrize("repusher,ender", list(itertools.product(PRODUCERS, SDKS)), ids=lambda v: str(v))
def test_a_stale_reservation_neither_deletes_nor_releases_the_newer_job(
    drivers: Any, rds: Any, keys: Any, repusher: str, ender: str
) -> None:
    t = topic("reserved", repusher, ender)
    job_id = new_id(repusher)
    push(drivers, "rust", t, job_id, 0, b"first")
    job = ok(drivers, "python", {"op": "breserve", "topic": t, "ttr_ms": 30_000, "timeout_ms": 10_000})["job"]
    assert job is not None and job["id"] == job_id
    push(drivers, repusher, t, job_id, LATER_MS, b"second")
    for op, extra in [("ack", {}), ("release", {"delay_ms": 0}), ("bury", {}), ("touch", {"ttr_ms": 1000})]:
        for receipt in (job["receipt"], None):
            r = ok(drivers, ender, {"op": op, "id": job_id, **keys.named(t), "receipt": receipt, **extra})
            held = r["deadline"] is not None if op == "touch" else r["done"]
            assert not held, f"{ender} {op} (receipt {receipt}) ended a reservation of a job pushed again by {repusher}"
    assert_waits_later(rds, keys, t, job_id, b"second")


@pytest.mark.parametrize("repusher", PRODUCERS)
def test_the_server_drops_a_stale_reservation_without_moving_the_newer_job(
    drivers: Any, rds: Any, keys: Any, repusher: str
) -> None:
    t = topic("expiry", repusher)
    job_id = new_id(repusher)
    push(drivers, "php", t, job_id, 0, b"first")
    job = ok(drivers, "rust", {"op": "breserve", "topic": t, "ttr_ms": 200, "timeout_ms": 10_000})["job"]
    assert job is not None
    push(drivers, repusher, t, job_id, LATER_MS, b"second")
    # The reservation runs out; the server must drop it, not retry the job.
    assert wait_until(lambda: rds.zscore(keys.reserved_of(t), job_id) is None), "reservation never ended"
    assert_waits_later(rds, keys, t, job_id, b"second")
    assert rds.llen(keys.ready(t)) == 0


# ----------------------------------------------------------- if absent


@pytest.mark.parametrize("holder,pusher", list(itertools.product(PRODUCERS, SDKS)), ids=lambda v: str(v))
def test_if_absent_writes_nothing_and_names_the_holder(
    drivers: Any, rds: Any, keys: Any, holder: str, pusher: str
) -> None:
    first, second = topic("holder", holder, pusher), topic("other", holder, pusher)
    if LAYOUT == "topic":
        second = first  # ids are per topic: another topic's id is free (test_conformance_topic_layout.py)
    job_id = new_id(holder)
    before = now(rds)
    push(drivers, holder, first, job_id, 60_000, b"close the order")
    due = rds.zscore(keys.pool_of(first), job_id)
    r = push(drivers, pusher, second, job_id, 0, b"an sms", if_absent=True)
    taken = r.get("taken")
    assert taken is not None, f"{pusher} pushed over an id held by {holder}'s job: {r}"
    assert taken["topic"] == first
    assert taken["due"] is not None and abs(taken["due"] - due) < 0.0015, (taken, due)
    assert taken["due"] >= before + 59
    assert rds.hget(keys.bucket(job_id, first), "topic") == first.encode()
    assert rds.hget(keys.bucket(job_id, first), "body") == b"close the order"
    assert rds.zscore(keys.pool_of(first), job_id) == due


@pytest.mark.parametrize("pusher", SDKS)
def test_if_absent_reports_a_job_that_is_no_longer_waiting_without_a_due_time(
    drivers: Any, rds: Any, keys: Any, pusher: str
) -> None:
    t = topic("ready-holder", pusher)
    job_id = new_id(pusher)
    push(drivers, SETTER, t, job_id, 0, b"ready")
    wait_ready(rds, keys, t, job_id)
    taken = push(drivers, pusher, t, job_id, 0, b"again", if_absent=True).get("taken")
    assert taken == {"topic": t, "due": None}


@pytest.mark.parametrize("pusher", SDKS)
def test_if_absent_on_a_free_id_pushes_and_replace_stays_the_default(
    drivers: Any, rds: Any, keys: Any, pusher: str
) -> None:
    a, b = topic("free", pusher), topic("replaced", pusher)
    job_id = new_id(pusher)
    r = push(drivers, pusher, a, job_id, 60_000, b"one", if_absent=True)
    assert r.get("taken") is None
    assert rds.hget(keys.bucket(job_id, a), "topic") == a.encode()
    push(drivers, pusher, b, job_id, 60_000, b"two")
    assert rds.hget(keys.bucket(job_id, b), "topic") == b.encode()
    assert rds.hget(keys.bucket(job_id, b), "body") == b"two"
    if LAYOUT == "classic":
        return  # without if_absent: 1.x's behaviour, the id moved to the new topic (the bucket says so)
    # Ids are per topic: the first job stays, and the same push again replaces on its topic.
    assert rds.hget(keys.bucket(job_id, a), "body") == b"one"
    assert rds.zscore(keys.pool_of(a), job_id) is not None
    assert push(drivers, pusher, a, job_id, 60_000, b"three").get("taken") is None
    assert rds.hget(keys.bucket(job_id, a), "body") == b"three"


@pytest.mark.parametrize("pusher", SDKS)
def test_push_many_if_absent_writes_the_free_ids_and_reports_the_taken(
    drivers: Any, rds: Any, keys: Any, pusher: str
) -> None:
    t = topic("many", pusher)
    held, free = new_id("held"), new_id("free")
    push(drivers, SETTER, t, held, 60_000, b"keep me")
    held_due = rds.zscore(keys.pool_of(t), held)
    # Ids are global in the classic layout: taken on any topic; per topic in the other.
    over = t + "-x" if LAYOUT == "classic" else t
    jobs: List[Dict[str, Any]] = [
        {"topic": t, "id": free, "delay_ms": 30_000, "body_b64": base64.b64encode(b"new").decode()},
        {"topic": over, "id": held, "delay_ms": 0, "body_b64": base64.b64encode(b"over").decode()},
    ]
    r = ok(drivers, pusher, {"op": "push_many", "if_absent": True, "jobs": jobs})
    due: List[Optional[float]] = r["due"]
    assert due[0] is not None and due[1] is None, due
    assert abs(due[0] - rds.zscore(keys.pool_of(t), free)) < 0.0015
    assert r["taken"] == [{"id": held, "topic": t, "due": pytest.approx(held_due, abs=0.0015)}]
    assert rds.hget(keys.bucket(held, t), "body") == b"keep me"
    assert rds.hget(keys.bucket(free, t), "body") == b"new"
