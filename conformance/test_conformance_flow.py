"""A paused topic hands out nothing through any SDK (issue 23;
docs/PROTOCOL.md, "Flow control (pause)").

Each controller (the three SDKs' pause and resume, `delayer pause|resume`,
HTTP POST /v1/topics/{topic}/pause|resume) pauses for every SDK: then each
SDK's pop, reserve, bpop and breserve give nothing, and the ready list
keeps its ids in their order; a bpop or breserve already waiting when a job
becomes ready waits on the topic's gate, and a resume wakes it well before
its 5 s recheck. The server moves none of a paused topic's due jobs (the
classic layout sets them aside) and makes them ready, in due order, after
the resume. One test still writes the pause by hand (the flow hash is the
protocol). Runs in both layouts (CONFORMANCE_LAYOUT).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
import uuid
from typing import Any, Dict, List

import pytest

from conftest import TIMER_INTERVAL_MS
from harness import new_id, ok, wait_until

SDKS = ["rust", "python", "php"]
CONTROLLERS = SDKS + ["cli", "http"]


def control(how: str, action: str, topic: str, drivers: Any, server: Any, http: Any) -> bool:
    """Pauses or resumes ``topic`` through ``how``; whether that changed it."""
    if how in SDKS:
        return bool(ok(drivers, how, {"op": action, "topic": topic})["changed"])
    if how == "cli":
        done = subprocess.run([str(server.exe), "-c", str(server.conf), action, topic, "--json"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        state = json.loads(done.stdout)
    else:
        req = urllib.request.Request(f"http://127.0.0.1:{http.http_port}/v1/topics/{topic}/{action}", data=b"",
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as answer:
            state = json.loads(answer.read())
    assert state["topic"] == topic and state["paused"] == (action == "pause"), state
    return bool(state["changed"])


def pause(rds: Any, keys: Any, topic: str) -> None:
    """A pause written by hand, as an operator may: the flag alone."""
    rds.hset(keys.flow(topic), "paused", "1.000")


def resume(drivers: Any, topic: str, waiting: str = "") -> None:
    """A resume through an SDK whose driver is not ``waiting`` (a driver
    answers one request at a time)."""
    by = "php" if waiting == "rust" else "rust"
    assert ok(drivers, by, {"op": "resume", "topic": topic})["changed"]


def blocked_on(rds: Any, cmd: str) -> int:
    return sum(1 for c in rds.client_list() if "b" in c.get("flags", "") and c.get("cmd") == cmd)


def push_ready(drivers: Any, rds: Any, keys: Any, topic: str, n: int) -> List[str]:
    """``n`` jobs due now, moved to the ready list by the server."""
    ids = [new_id("flow") for _ in range(n)]
    # Due 1 ms apart: two jobs due in the same millisecond leave in id order.
    for delay, job_id in enumerate(ids):
        ok(drivers, "python", {"op": "push", "topic": topic, "id": job_id, "delay_ms": delay, "body_b64": ""})
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
    resume(drivers, topic)
    got = ok(drivers, sdk, {"op": "pop", "topic": topic})["job"]
    assert got is not None and got["id"] == ids[0], f"{sdk}: first due, first out after the resume: {got}"


@pytest.mark.parametrize("op", ["bpop", "breserve"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_wait_across_a_pause_wakes_at_the_resume(
        sdk: str, op: str, drivers: Any, delayer_server: Any, rds: Any, keys: Any) -> None:
    topic = f"flow-wait-{sdk}-{uuid.uuid4().hex[:8]}"
    # Ready first: a paused topic's due jobs are not moved (per-topic layout).
    [job_id] = push_ready(drivers, rds, keys, topic, 1)
    assert ok(drivers, sdk, {"op": "pause", "topic": topic})["changed"]
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
    resume(drivers, topic, waiting=sdk)
    waiter.join(30)
    assert answer["reply"]["job"] is not None and answer["reply"]["job"]["id"] == job_id, answer
    assert answer["at"] - resumed < 2.0, f"{sdk} {op}: woken {answer['at'] - resumed:.2f} s after the resume"


@pytest.mark.parametrize("how", CONTROLLERS)
def test_each_controller_pauses_and_resumes_for_every_sdk(
        how: str, drivers: Any, delayer_server: Any, http_server: Any, rds: Any, keys: Any) -> None:
    topic = f"flow-ctl-{how}-{uuid.uuid4().hex[:8]}"
    [job_id] = push_ready(drivers, rds, keys, topic, 1)
    assert control(how, "pause", topic, drivers, delayer_server, http_server) is True
    assert control(how, "pause", topic, drivers, delayer_server, http_server) is False, "paused already"
    for sdk in SDKS:
        assert ok(drivers, sdk, {"op": "is_paused", "topic": topic})["paused"] is True, sdk
        assert ok(drivers, sdk, {"op": "pop", "topic": topic})["job"] is None, f"{sdk} popped a paused topic's job"
        assert ok(drivers, sdk, {"op": "flow", "topic": topic})["paused_since"] is not None, sdk
    assert control(how, "resume", topic, drivers, delayer_server, http_server) is True
    assert control(how, "resume", topic, drivers, delayer_server, http_server) is False, "running already"
    assert all(ok(drivers, sdk, {"op": "is_paused", "topic": topic})["paused"] is False for sdk in SDKS)
    got = ok(drivers, "php", {"op": "pop", "topic": topic})["job"]
    assert got is not None and got["id"] == job_id


def test_the_servers_move_nothing_of_a_paused_topic_and_all_of_it_after_the_resume(
        drivers: Any, delayer_server: Any, http_server: Any, rds: Any, keys: Any) -> None:
    """Two servers: neither makes a paused topic's due jobs ready; the
    classic layout sets them aside (held), the per-topic one leaves them in
    the pool; after the resume every job is ready once, in due order."""
    topic = f"flow-held-{uuid.uuid4().hex[:8]}"
    assert ok(drivers, "python", {"op": "pause", "topic": topic})["changed"]
    ids = [new_id("held") for _ in range(20)]
    for i, job_id in enumerate(ids):
        ok(drivers, "rust", {"op": "push", "topic": topic, "id": job_id, "delay_ms": i, "body_b64": ""})
    held = lambda: ok(drivers, "rust", {"op": "flow", "topic": topic})["held"]  # noqa: E731
    assert wait_until(lambda: held() == 20), f"held: {held()}"
    time.sleep(TIMER_INTERVAL_MS / 1000 * 3)
    assert rds.llen(keys.ready(topic)) == 0, "a server made a paused topic's job ready"
    looked = ok(drivers, "php", {"op": "job", "topic": topic, "id": ids[0]})["job"]
    assert looked["state"] == "scheduled", looked
    assert ok(drivers, "php", {"op": "resume", "topic": topic})["changed"]
    assert wait_until(lambda: rds.llen(keys.ready(topic)) == 20), "not every held job became ready"
    out = [ok(drivers, "python", {"op": "pop", "topic": topic})["job"]["id"] for _ in ids]
    assert out == ids, "due order"
    assert ok(drivers, "rust", {"op": "pop", "topic": topic})["job"] is None
