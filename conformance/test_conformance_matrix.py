"""Every ordered pair producer -> consumer of {rust, python, php, raw1x}:
a job pushed by one client, moved by the real server, consumed by another
arrives exactly as pushed; a removal by one cancels a push by another; the
delay a producer asked for is honoured on the consumer's side.
"""

from __future__ import annotations

import base64
import itertools
import random
import time
import uuid
from decimal import Decimal
from typing import Any, Dict, List, Optional, Tuple

import pytest

from conftest import TIMER_INTERVAL_MS

CLIENTS = ["rust", "python", "php", "raw1x"]
PAIRS = list(itertools.product(CLIENTS, CLIENTS))
PAIR_IDS = [f"{x}->{y}" for x, y in PAIRS]

BODIES: Dict[str, bytes] = {
    "empty": b"",
    "unicode": "héllo wörld ✓ 延迟 🚀".encode("utf-8"),
    "binary": bytes(range(256)),
    "1MiB": random.Random(20111).randbytes(1 << 20),
}

#: One topic per ordered pair (and session), so no test sees another's jobs.
_SESSION = uuid.uuid4().hex[:8]
TIMER_S = TIMER_INTERVAL_MS / 1000
#: How long a consumer waits for a job due now: the timer, plus a lot of room.
DELIVERY_DEADLINE_S = 10.0
#: Slack for "ready within the timer's bound": room for a loaded 2-core
#: machine (a CI run at a third of the usual speed delivered 1.2-1.3 s late),
#: still far under the 10 s sweep a job with a lost wake-up would wait for.
#: How late the server moves is measured in bench/ (p50 3 ms), not here.
SLACK_S = 3.0

#: Jobs removed by test_remove: (consumer, topic, id, due), checked after their
#: due time by test_removed_jobs_stay_undelivered.
REMOVED: List[Tuple[str, str, str, float]] = []


def topic_for(x: str, y: str, what: str) -> str:
    return f"cf-{_SESSION}-{x}-{y}-{what}"


def new_id(tag: str) -> str:
    return f"{tag}:{uuid.uuid4().hex}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def redis_now(rds: Any) -> float:
    """Redis's clock, Unix seconds (TIME)."""
    secs, usecs = rds.time()
    return secs + usecs / 1e6


def ok(response: Dict[str, Any], what: str) -> Dict[str, Any]:
    assert response["ok"] is True, f"{what} failed: {response.get('error')}"
    return response


def push(drivers: Any, x: str, topic: str, job_id: str, delay_ms: int, body: bytes = b"") -> Dict[str, Any]:
    req = {"op": "push", "topic": topic, "id": job_id, "delay_ms": delay_ms, "body_b64": b64(body)}
    return ok(drivers[x].request(req), f"push by {x}")


def check_job(job: Optional[Dict[str, Any]], job_id: str, topic: str, body: bytes, who: str) -> None:
    assert job is not None, f"{who} got nothing"
    assert job["id"] == job_id, f"{who}: id {job['id']!r} != {job_id!r}"
    assert job["topic"] == topic, f"{who}: topic {job['topic']!r} != {topic!r}"
    got = base64.b64decode(job["body_b64"])
    if got != body:
        first = next((i for i, (a, b) in enumerate(zip(got, body)) if a != b), min(len(got), len(body)))
        pytest.fail(f"{who}: body differs: {len(got)} bytes received, {len(body)} pushed, first difference at byte {first}")


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """Every test here needs the real server moving jobs."""


# ------------------------------------------------------------------ delivery


@pytest.mark.parametrize("mode", ["pop", "bpop"])
@pytest.mark.parametrize("body_name", list(BODIES))
@pytest.mark.parametrize("x,y", PAIRS, ids=PAIR_IDS)
def test_deliver(drivers: Any, rds: Any, keys: Any, x: str, y: str, body_name: str, mode: str) -> None:
    body = BODIES[body_name]
    topic = topic_for(x, y, "deliver")
    job_id = new_id(f"{x}-{body_name}-{mode}")
    push(drivers, x, topic, job_id, 0, body)
    assert rds.exists(keys.bucket(job_id, topic)) == 1, f"push by {x} left no bucket"

    consumer = drivers[y]
    if mode == "bpop":
        r = ok(consumer.request({"op": "bpop", "topic": topic, "timeout_ms": int(DELIVERY_DEADLINE_S * 1000)},
                                timeout=DELIVERY_DEADLINE_S + 30), f"bpop by {y}")
        job = r["job"]
    else:
        job = None
        end = time.monotonic() + DELIVERY_DEADLINE_S
        while job is None and time.monotonic() < end:
            job = ok(consumer.request({"op": "pop", "topic": topic}), f"pop by {y}")["job"]
            if job is None:
                time.sleep(0.02)
    check_job(job, job_id, topic, body, f"{y} ({mode})")
    # at most once: the job is gone from Redis as it is handed out
    assert rds.exists(keys.bucket(job_id, topic)) == 0, f"{y} left the bucket of a popped job"
    assert rds.zscore(keys.pool_of(topic), job_id) is None
    assert ok(consumer.request({"op": "pop", "topic": topic}), f"pop by {y}")["job"] is None


# ------------------------------------------------------------------ remove


@pytest.mark.parametrize("x,y", PAIRS, ids=PAIR_IDS)
def test_remove(drivers: Any, rds: Any, keys: Any, x: str, y: str) -> None:
    topic = topic_for(x, y, "remove")
    job_id = new_id(f"{x}-rm")
    push(drivers, x, topic, job_id, 3000, b"cancel me")
    due = rds.zscore(keys.pool_of(topic), job_id)
    assert due is not None, f"push by {x} did not reach the pool"
    assert redis_now(rds) < due - 1.0, "the job must still be waiting when removed"

    r = ok(drivers[y].request({"op": "remove", "id": job_id, "topic": topic}), f"remove by {y}")
    assert r["removed"] is True, f"{y} did not report the removal of a waiting job pushed by {x}"
    assert rds.zscore(keys.pool_of(topic), job_id) is None, "the pool still holds the removed job"
    assert rds.exists(keys.bucket(job_id, topic)) == 0, "the removed job's bucket is still there"

    r = ok(drivers[y].request({"op": "bpop", "topic": topic, "timeout_ms": 300}, timeout=30), f"bpop by {y}")
    assert r["job"] is None, f"{y} got a removed job: {r['job']}"
    r = ok(drivers[y].request({"op": "remove", "id": job_id, "topic": topic}), f"second remove by {y}")
    assert r["removed"] is False, f"{y} reports removing a job that was already removed"
    REMOVED.append((y, topic, job_id, due))


def test_removed_jobs_stay_undelivered(drivers: Any, rds: Any, keys: Any) -> None:
    """Once past the due time (plus the timer and slack) of every job that
    test_remove removed, none of them reached a ready queue."""
    if not REMOVED:
        pytest.skip("test_remove did not run")
    last_due = max(due for _, _, _, due in REMOVED)
    assert harnessed_wait(lambda: redis_now(rds) > last_due + TIMER_S + SLACK_S, last_due - redis_now(rds) + 30)
    for consumer, topic, job_id, _ in REMOVED:
        assert rds.llen(keys.ready(topic)) == 0, f"{job_id} (removed) reached ready queue {topic}"
        r = ok(drivers[consumer].request({"op": "pop", "topic": topic}), f"pop by {consumer}")
        assert r["job"] is None, f"{consumer} got removed job {r['job']}"
        assert rds.zscore(keys.pool_of(topic), job_id) is None


def harnessed_wait(check: Any, deadline: float) -> bool:
    from harness import wait_until

    return wait_until(check, deadline=max(deadline, 1.0), step=0.05)


# ------------------------------------------------------------------ delays


@pytest.mark.parametrize("x,y", PAIRS, ids=PAIR_IDS)
def test_delay_honoured(drivers: Any, rds: Any, keys: Any, x: str, y: str) -> None:
    topic = topic_for(x, y, "delay")
    job_id = new_id(f"{x}-delay")
    delay_ms = 2000 if x == "raw1x" else 1500  # 1.x: whole seconds
    before = redis_now(rds)
    r = push(drivers, x, topic, job_id, delay_ms, b"on time")
    after = redis_now(rds)
    # one transaction: what was in Redis at one instant of Redis's clock
    pipe = rds.pipeline(transaction=True)
    pipe.time().zscore(keys.pool_of(topic), job_id).llen(keys.ready(topic))
    (secs, usecs), score, ready_len = pipe.execute()
    assert score is not None, f"push by {x} did not reach the pool"
    if secs + usecs / 1e6 < score:
        assert ready_len == 0, "the job is in its ready queue before its due time"

    delay = delay_ms / 1000
    if x == "raw1x":
        # 1.x: the client's clock, whole seconds: int(time()) + delay
        assert score == int(score)
        assert before - 1.0 + delay - 0.05 <= score <= after + delay + 0.05, (before, score, after)
    else:
        # Redis's clock at the push (TIME in push.lua, truncated to the ms) + delay
        assert before + delay - 0.0011 <= score <= after + delay + 0.0011, (before, score, after)
        if "due" in r:
            assert abs(Decimal(str(r["due"])) - Decimal(str(score))) < Decimal("0.0005"), (r["due"], score)

    wait_s = max(score - redis_now(rds), 0) + TIMER_S + SLACK_S + 5
    r = ok(drivers[y].request({"op": "bpop", "topic": topic, "timeout_ms": int(wait_s * 1000)}, timeout=wait_s + 30),
           f"bpop by {y}")
    popped = redis_now(rds)
    check_job(r["job"], job_id, topic, b"on time", f"{y} (bpop)")
    assert popped >= score, f"delivered {score - popped:.3f} s before its due time"
    assert popped <= score + TIMER_S + SLACK_S, f"delivered {popped - score:.3f} s after its due time"
