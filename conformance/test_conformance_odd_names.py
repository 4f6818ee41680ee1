"""Any id or topic a Delayer 1.x client could write works everywhere.

1.x refused only empty ids and topics, so a 1.x job on topic ``close order``,
or with an id holding spaces, braces, control characters, hundreds of bytes or
digits only (1.x PHP writes an integer id as its decimal string), must be
moved by the real server and popped, bpopped, removed, reserved, ended and
dead-lettered by every SDK; and every SDK pushes such names for a 1.x
consumer. Only the empty name is refused (test_conformance_rejections.py).

In the per-topic layout (CONFORMANCE_LAYOUT=topic) ids are as free, and a
topic is free but for braces (they would move the hash tag), so the topics
here lose theirs; a 1.x client cannot write that layout, so the next SDK
plays its part (pusher or consumer) there.
"""

from __future__ import annotations

import base64
import random
import time
import uuid
from typing import Any, Dict, List, Optional

import pytest

from conftest import LAYOUT
from harness import ok

SDKS = ["rust", "python", "php"]
_SESSION = uuid.uuid4().hex[:8]
WAIT_S = 10.0


@pytest.fixture(scope="module", autouse=True)
def _server_running(delayer_server: Any) -> None:
    """The real server moves every job here."""


def topic(sdk: str, what: str) -> str:
    """``close order`` plus what keeps tests apart (still with spaces, and
    braces where the layout allows them)."""
    if LAYOUT == "topic":
        return f"close order {sdk} {what} {_SESSION}"
    return f"close order {{{sdk}}} {what} {_SESSION}"


def old_client(sdk: str) -> str:
    """Who writes and reads as 1.x did: raw1x, or in the per-topic layout
    (which 1.x cannot write) the SDK after ``sdk``."""
    return "raw1x" if LAYOUT == "classic" else SDKS[(SDKS.index(sdk) + 1) % len(SDKS)]


def odd_ids(tag: str) -> List[str]:
    """Ids 1.x accepted and the old name rules refused, unique to ``tag``."""
    u = f"{tag}-{uuid.uuid4().hex[:8]}"
    return [
        f"order {u}",
        f"{{{u}}}",
        f"}}{u}{{",
        f"订单 {u} 一",
        f"tab\t{u}\nline",
        f"{u} " + "x" * 300,
        f"{u}\x7f\x00",
        str(random.Random(u).randrange(10**11, 10**12)),
    ]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def push(drivers: Any, who: str, t: str, job_id: str, delay_ms: int = 0) -> None:
    ok(drivers, who, {"op": "push", "topic": t, "id": job_id, "delay_ms": delay_ms,
                      "body_b64": b64(job_id.encode("utf-8"))})


def take_all(drivers: Any, who: str, op: str, t: str, count: int, **extra: Any) -> List[Dict[str, Any]]:
    """``count`` jobs of ``t`` taken with ``op`` (pop / bpop / reserve / breserve), polling up to WAIT_S."""
    got: List[Dict[str, Any]] = []
    end = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < end:
        job: Optional[Dict[str, Any]] = ok(drivers, who, dict({"op": op, "topic": t}, **extra))["job"]
        if job is None:
            time.sleep(0.02)
            continue
        got.append(job)
    assert len(got) == count, f"{who} {op} got {len(got)} of {count} jobs of {t!r}"
    return got


def check(jobs: List[Dict[str, Any]], ids: List[str], t: str) -> None:
    assert sorted(j["id"] for j in jobs) == sorted(ids)
    for j in jobs:
        assert j["topic"] == t, j
        assert base64.b64decode(j["body_b64"]) == j["id"].encode("utf-8"), j


@pytest.mark.parametrize("mode", ["pop", "bpop"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_1x_job_with_odd_names_is_popped_by_every_sdk(drivers: Any, rds: Any, keys: Any, sdk: str,
                                                        mode: str) -> None:
    t, ids = topic(sdk, mode), odd_ids(f"{sdk}-{mode}")
    for job_id in ids:
        push(drivers, old_client(sdk), t, job_id)
    extra = {"timeout_ms": 2000} if mode == "bpop" else {}
    check(take_all(drivers, sdk, mode, t, len(ids), **extra), ids, t)
    for job_id in ids:
        assert rds.exists(keys.bucket(job_id, t)) == 0, f"{sdk} left the bucket of {job_id!r}"
    assert ok(drivers, sdk, {"op": "pop", "topic": t})["job"] is None


@pytest.mark.parametrize("sdk", SDKS)
def test_a_1x_job_with_odd_names_is_removed_by_every_sdk(drivers: Any, rds: Any, keys: Any, sdk: str) -> None:
    t, ids = topic(sdk, "remove"), odd_ids(f"{sdk}-remove")
    for job_id in ids:
        push(drivers, old_client(sdk), t, job_id, delay_ms=60_000)
        removed = ok(drivers, sdk, {"op": "remove", "id": job_id, **keys.named(t)})["removed"]
        assert removed is True, f"{sdk} removed nothing: {job_id!r}"
        assert rds.zscore(keys.pool_of(t), job_id) is None and rds.exists(keys.bucket(job_id, t)) == 0


@pytest.mark.parametrize("sdk", SDKS)
def test_odd_names_pushed_by_every_sdk_reach_a_1x_consumer(drivers: Any, sdk: str) -> None:
    t, ids = topic(sdk, "push"), odd_ids(f"{sdk}-push")
    for job_id in ids[:2]:
        push(drivers, sdk, t, job_id)
    jobs = [{"topic": t, "id": i, "delay_ms": 0, "body_b64": b64(i.encode("utf-8"))} for i in ids[2:]]
    ok(drivers, sdk, {"op": "push_many", "if_absent": False, "jobs": jobs})
    check(take_all(drivers, old_client(sdk), "pop", t, len(ids)), ids, t)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_1x_job_with_odd_names_is_reserved_and_dead_lettered_by_every_sdk(drivers: Any, rds: Any, keys: Any,
                                                                            sdk: str) -> None:
    t, ids = topic(sdk, "reserve"), odd_ids(f"{sdk}-reserve")
    for job_id in ids:
        push(drivers, old_client(sdk), t, job_id)
    held = take_all(drivers, sdk, "reserve", t, len(ids), ttr_ms=60_000)
    check(held, ids, t)
    acked, ended = held[0], held[1:]

    def holding(job: Dict[str, Any]) -> Dict[str, Any]:
        """The fields naming ``job``'s reservation."""
        return {"id": job["id"], **keys.named(t), "receipt": job["receipt"]}

    for job in held:
        touched = ok(drivers, sdk, {"op": "touch", **holding(job), "ttr_ms": 60_000})
        assert touched["deadline"] is not None, f"{sdk} could not touch {job['id']!r}"
    assert ok(drivers, sdk, {"op": "ack", "id": acked["id"], **keys.named(t), "receipt": None})["done"] is True
    for job in ended:
        r = ok(drivers, sdk, {"op": "release", **holding(job), "delay_ms": 0})
        assert r["done"] is True, f"{sdk} could not release {job['id']!r}"
    again = take_all(drivers, sdk, "breserve", t, len(ended), ttr_ms=60_000, timeout_ms=2000)
    check(again, [j["id"] for j in ended], t)
    for job in again:
        assert ok(drivers, sdk, {"op": "bury", **holding(job)})["done"] is True

    dead = ok(drivers, sdk, {"op": "dead_list", "topic": t, "start": 0, "count": 100})["dead"]
    assert sorted(d["id"] for d in dead) == sorted(j["id"] for j in ended)
    half = [j["id"] for j in ended[: len(ended) // 2]]
    rest = [j["id"] for j in ended[len(ended) // 2:]]
    assert ok(drivers, sdk, {"op": "purge_dead", "topic": t, "ids": rest})["count"] == len(rest)
    assert ok(drivers, sdk, {"op": "requeue_dead", "topic": t, "ids": half})["count"] == len(half)
    back = take_all(drivers, sdk, "reserve", t, len(half), ttr_ms=60_000)
    assert sorted(j["id"] for j in back) == sorted(half)
    for job in back:
        assert ok(drivers, sdk, {"op": "ack", **holding(job)})["done"] is True
    for job_id in ids:
        assert rds.exists(keys.bucket(job_id, t)) == 0, f"{job_id!r} left behind"


@pytest.mark.parametrize("sdk", SDKS)
def test_a_waiting_job_with_an_odd_id_is_rescheduled_by_every_sdk(drivers: Any, rds: Any, keys: Any, sdk: str) -> None:
    t, ids = topic(sdk, "reschedule"), odd_ids(f"{sdk}-reschedule")
    for job_id in ids:
        push(drivers, old_client(sdk), t, job_id, delay_ms=600_000)
        r = ok(drivers, sdk, {"op": "reschedule", "id": job_id, **keys.named(t), "delay_ms": 0})
        assert r["due"] is not None, f"{sdk} did not reschedule {job_id!r}"
    check(take_all(drivers, sdk, "pop", t, len(ids)), ids, t)
