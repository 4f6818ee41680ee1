"""A job set aside in its topic's classic flow pool is still looked up,
rescheduled and removed by every SDK (issue 23; docs/design/flow-control.md
§2 (b): "while a topic is paused, pushes, removes, reschedules and lookups
work as usual").

The classic layout only (the per-topic one has no flow pool: a held job
stays in its topic's pool). The set-aside is made by hand, as the server's
move.lua does it: the id leaves `<prefix>job_pool` and goes, with the same
score, to `<prefix>flow_pool:<topic>`; `<prefix>scheduled_count` keeps
counting it. Then, through each SDK:

- lookup says "scheduled", due at the flow pool's score;
- reschedule puts the id back in the pool at the new due time and out of
  the flow pool, counts unchanged (it was counted already);
- remove cancels it: out of the flow pool, bucket gone, count -1;
- a flow pool of the wrong type (a string) breaks nothing: remove still
  cancels the job, reschedule answers "not waiting", lookup answers "ready"
  (what it answers for a job in none of the sets).

Each test keeps a job of its own topic waiting in the pool an hour away:
the server (when another test started it) deletes the counts when the pool
is empty, which would spoil the count checks.
"""

from __future__ import annotations

import uuid
from typing import Any, Tuple

import pytest

from conftest import LAYOUT
from harness import new_id, ok, wait_until

pytestmark = pytest.mark.skipif(LAYOUT == "topic", reason="the classic layout's flow pools only")

SDKS = ["rust", "python", "php"]


def flow_pool(keys: Any, topic: str) -> str:
    return keys.prefix + "flow_pool:" + topic


def counts(keys: Any) -> str:
    return keys.prefix + "scheduled_count"


def push(drivers: Any, topic: str, job_id: str, delay_ms: int) -> None:
    ok(drivers, "python", {"op": "push", "topic": topic, "id": job_id, "delay_ms": delay_ms, "body_b64": "aGk="})


def held_job(drivers: Any, rds: Any, keys: Any, sdk: str) -> Tuple[str, str, float]:
    """A topic with a keeper in the pool, and one job of it set aside in its
    flow pool as move.lua does: (topic, id, due time)."""
    topic = f"flow-pool-{sdk}-{uuid.uuid4().hex[:8]}"
    push(drivers, topic, new_id("keeper"), 3_600_000)
    job_id = new_id(f"held-{sdk}")
    push(drivers, topic, job_id, 60_000)
    score = rds.zscore(keys.pool, job_id)
    assert score is not None
    pipe = rds.pipeline(transaction=True)
    pipe.zrem(keys.pool, job_id).zadd(flow_pool(keys, topic), {job_id: score})
    pipe.execute()
    assert int(rds.hget(counts(keys), topic)) == 2
    return topic, job_id, float(score)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_held_job_is_looked_up_as_scheduled_at_its_due_time(sdk: str, drivers: Any, rds: Any, keys: Any) -> None:
    topic, job_id, due = held_job(drivers, rds, keys, sdk)
    job = ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]
    assert job["state"] == "scheduled", f"{sdk}: {job}"
    assert abs(job["due"] - due) < 0.0015, f"{sdk}: due {job['due']}, the flow pool says {due}"
    assert job["topic"] == topic and job["body_size"] == 2
    # Read-only: the job stays where it was.
    assert rds.zscore(flow_pool(keys, topic), job_id) == due and rds.zscore(keys.pool, job_id) is None


@pytest.mark.parametrize("sdk", SDKS)
def test_a_held_job_is_rescheduled_back_into_the_pool(sdk: str, drivers: Any, rds: Any, keys: Any) -> None:
    topic, job_id, _ = held_job(drivers, rds, keys, sdk)
    r = ok(drivers, sdk, {"op": "reschedule", "id": job_id, "delay_ms": 120_000})
    assert r["due"] is not None, f"{sdk}: a held job is waiting, so it is rescheduled"
    score = rds.zscore(keys.pool, job_id)
    assert score is not None and abs(score - float(r["due"])) < 0.0015, f"{sdk}: pool {score}, reply {r['due']}"
    assert rds.zscore(flow_pool(keys, topic), job_id) is None, f"{sdk} left the id in the flow pool"
    assert int(rds.hget(counts(keys), topic)) == 2, "counted once, before and after"
    assert abs(float(rds.hget(keys.bucket(job_id), "due")) - score) < 0.0015, "the bucket's due field follows"
    job = ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]
    assert job["state"] == "scheduled" and abs(job["due"] - score) < 0.0015


@pytest.mark.parametrize("sdk", SDKS)
def test_a_held_job_is_removed(sdk: str, drivers: Any, rds: Any, keys: Any) -> None:
    topic, job_id, _ = held_job(drivers, rds, keys, sdk)
    assert ok(drivers, sdk, {"op": "remove", "id": job_id})["removed"] is True
    assert rds.zscore(flow_pool(keys, topic), job_id) is None, f"{sdk} left the id in the flow pool"
    assert rds.exists(keys.bucket(job_id)) == 0
    assert int(rds.hget(counts(keys), topic)) == 1, "the held job is counted no more, the keeper still is"
    assert ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]["state"] == "unknown"
    assert ok(drivers, sdk, {"op": "remove", "id": job_id})["removed"] is False


@pytest.mark.parametrize("sdk", SDKS)
def test_a_flow_pool_of_the_wrong_type_breaks_nothing(sdk: str, drivers: Any, rds: Any, keys: Any) -> None:
    topic = f"flow-pool-bad-{sdk}-{uuid.uuid4().hex[:8]}"
    push(drivers, topic, new_id("keeper"), 3_600_000)
    rds.set(flow_pool(keys, topic), "not a zset")
    job_id = new_id(f"lost-{sdk}")
    push(drivers, topic, job_id, 60_000)
    rds.zrem(keys.pool, job_id)  # in no set: as if set aside into a key nobody can read
    job = ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]
    assert job["state"] == "ready" and job["due"] is None, f"{sdk}: {job}"
    assert ok(drivers, sdk, {"op": "reschedule", "id": job_id, "delay_ms": 0})["due"] is None
    assert rds.zscore(keys.pool, job_id) is None, "not waiting: not put back"
    assert ok(drivers, sdk, {"op": "remove", "id": job_id})["removed"] is True
    assert rds.exists(keys.bucket(job_id)) == 0, f"{sdk}: the bucket's DEL cancels the job anyway"
    assert rds.get(flow_pool(keys, topic)) == b"not a zset"


@pytest.mark.parametrize("op", ["pop", "reserve", "bpop", "breserve"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_held_id_is_not_handed_out_through_another_topics_stale_entry(
        sdk: str, op: str, drivers: Any, delayer_server: Any, rds: Any, keys: Any) -> None:
    """Classic ids are global: x is ready on A, then pushed again on paused B
    (the server sets it aside in B's flow pool). A's entry is stale: no
    consumer of A gets B's held job; after B's resume, B's consumer does."""
    a, b = f"flow-a-{uuid.uuid4().hex[:8]}", f"flow-b-{uuid.uuid4().hex[:8]}"
    job_id = new_id(f"global-{sdk}")
    push(drivers, a, job_id, 0)
    assert wait_until(lambda: rds.llen(keys.ready(a)) == 1), "the server did not move A's job"
    assert ok(drivers, "rust", {"op": "pause", "topic": b})["changed"]
    push(drivers, b, job_id, 0)
    assert wait_until(lambda: rds.zscore(flow_pool(keys, b), job_id) is not None), "not set aside"
    req = {"op": op, "topic": a, **({"ttr_ms": 30_000} if "reserve" in op else {}),
           **({"timeout_ms": 300} if op.startswith("b") else {})}
    assert ok(drivers, sdk, req)["job"] is None, f"{sdk} {op} handed out paused B's job through A"
    assert ok(drivers, "php", {"op": "resume", "topic": b})["changed"]
    got = ok(drivers, "python", {"op": "bpop", "topic": b, "timeout_ms": 10_000})["job"]
    assert got is not None and got["id"] == job_id, got
