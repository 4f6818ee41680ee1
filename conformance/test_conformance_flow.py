"""A paused topic hands out nothing through any SDK (issue 23, slice 1;
docs/PROTOCOL.md, "Flow control (pause)").

The pause is written by hand, as `delayer pause` will write it: the field
`paused` in the topic's flow hash. Then each SDK's pop, reserve, bpop and
breserve give nothing, and the ready list keeps its ids in their order; a
bpop or breserve already waiting when a job becomes ready waits on the
topic's gate, and a resume (the flag deleted, the gate written) wakes it
well before its 5 s recheck. Runs in both layouts (CONFORMANCE_LAYOUT).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

from harness import new_id, ok, wait_until

SDKS = ["rust", "python", "php"]


def pause(rds: Any, keys: Any, topic: str) -> None:
    rds.hset(keys.flow(topic), "paused", "1.000")


def resume(rds: Any, keys: Any, topic: str) -> None:
    """What a resume does: the flag goes, and the gate's one element wakes
    every waiter at once."""
    gate = keys.gate(topic)
    pipe = rds.pipeline(transaction=True)
    pipe.hdel(keys.flow(topic), "paused").delete(gate).rpush(gate, "1").pexpire(gate, 60_000)
    pipe.execute()


def blocked_on(rds: Any, cmd: str) -> int:
    return sum(1 for c in rds.client_list() if "b" in c.get("flags", "") and c.get("cmd") == cmd)


def push_ready(drivers: Any, rds: Any, keys: Any, topic: str, n: int) -> List[str]:
    """``n`` jobs due now, moved to the ready list by the server."""
    ids = [new_id("flow") for _ in range(n)]
    for i in ids:
        ok(drivers, "python", {"op": "push", "topic": topic, "id": i, "delay_ms": 0, "body_b64": ""})
    assert wait_until(lambda: rds.llen(keys.ready(topic)) == n), "the server did not move the jobs"
    return ids


@pytest.mark.parametrize("sdk", SDKS)
def test_a_paused_topic_hands_out_nothing_and_its_ready_list_stays_as_it_was(
        sdk: str, drivers: Any, delayer_server: Any, rds: Any, keys: Any) -> None:
    topic = f"flow-{sdk}-{uuid.uuid4().hex[:8]}"
    ids = push_ready(drivers, rds, keys, topic, 2)
    pause(rds, keys, topic)
    before = rds.lrange(keys.ready(topic), 0, -1)
    for req in ({"op": "pop", "topic": topic},
                {"op": "reserve", "topic": topic, "ttr_ms": 30_000},
                {"op": "bpop", "topic": topic, "timeout_ms": 300},
                {"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 300}):
        assert ok(drivers, sdk, req)["job"] is None, f"{sdk} {req['op']} handed out a job of a paused topic"
    assert rds.lrange(keys.ready(topic), 0, -1) == before, "the same ids, in the same order"
    resume(rds, keys, topic)
    got = ok(drivers, sdk, {"op": "pop", "topic": topic})["job"]
    assert got is not None and got["id"] == ids[0], f"{sdk}: first due, first out after the resume: {got}"


@pytest.mark.parametrize("op", ["bpop", "breserve"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_wait_across_a_pause_wakes_at_the_resume(
        sdk: str, op: str, drivers: Any, delayer_server: Any, rds: Any, keys: Any) -> None:
    topic = f"flow-wait-{sdk}-{uuid.uuid4().hex[:8]}"
    # Ready first: a paused topic's due jobs are not moved (per-topic layout).
    [job_id] = push_ready(drivers, rds, keys, topic, 1)
    pause(rds, keys, topic)
    answer: Dict[str, Any] = {}
    req = {"op": op, "topic": topic, "timeout_ms": 20_000, **({"ttr_ms": 30_000} if op == "breserve" else {})}

    def wait() -> None:
        answer["reply"] = ok(drivers, sdk, req, timeout=40)
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert wait_until(lambda: blocked_on(rds, "brpoplpush") == 1), f"{sdk} {op} never waited on the gate"
    time.sleep(0.5)
    assert "reply" not in answer, f"{sdk} {op} returned while paused: {answer}"
    assert rds.lrange(keys.ready(topic), 0, -1) == [job_id.encode()]
    resumed = time.monotonic()
    resume(rds, keys, topic)
    waiter.join(30)
    assert answer["reply"]["job"] is not None and answer["reply"]["job"]["id"] == job_id, answer
    assert answer["at"] - resumed < 2.0, f"{sdk} {op}: woken {answer['at'] - resumed:.2f} s after the resume"
