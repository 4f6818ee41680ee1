"""Rate limits at the broker (issue 23; docs/PROTOCOL.md, "Rate limits").

Every controller (the three SDKs' set_rate_limit / clear_rate_limit,
`delayer limit`, HTTP PUT / DELETE /v1/topics/{topic}/limit) sets a limit
that every SDK then reads alike (flow, stats, job lookup); the script's
input rules refuse bad rates alike everywhere, with one message; and two
servers on one Redis together make at most `burst + per_second * t` of a
limited topic's jobs ready in any t seconds, in due order, each once.
Runs in both layouts (CONFORMANCE_LAYOUT).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Dict, Optional, Tuple

import pytest

from conftest import TIMER_INTERVAL_MS
from harness import new_id, ok, wait_until

SDKS = ["rust", "python", "php"]
CONTROLLERS = SDKS + ["cli", "http"]


def cli(server: Any, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(server.exe), "-c", str(server.conf), *args], capture_output=True, text=True,
                          timeout=30)


def http(server: Any, method: str, topic: str, body: Optional[Dict[str, Any]] = None) -> Tuple[int, Dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/topics/{topic}/limit", data=data,
                                 method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def set_limit(how: str, topic: str, per_second: float, burst: Optional[int], drivers: Any, server: Any,
              web: Any) -> None:
    """Limits ``topic`` through ``how``."""
    if how in SDKS:
        state = ok(drivers, how, {"op": "set_rate_limit", "topic": topic, "per_second": per_second, "burst": burst})
        assert state["per_second"] == per_second, state
        return
    if how == "cli":
        args = ["limit", topic, f"{per_second:g}/s", "--json"] + (["--burst", str(burst)] if burst else [])
        done = cli(server, *args)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
    else:
        status, answer = http(web, "PUT", topic, {"per_second": per_second, **({"burst": burst} if burst else {})})
        assert status == 200, answer
    assert answer["topic"] == topic and answer["rate_limit"]["per_second"] == per_second, answer


def clear_limit(how: str, topic: str, drivers: Any, server: Any, web: Any) -> bool:
    """Clears ``topic``'s limit through ``how``; whether there was one."""
    if how in SDKS:
        return bool(ok(drivers, how, {"op": "clear_rate_limit", "topic": topic})["changed"])
    if how == "cli":
        done = cli(server, "limit", topic, "off", "--json")
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["rate_limit"] is None, answer
        return bool(answer["changed"])
    status, answer = http(web, "DELETE", topic)
    assert status == 200, answer
    return bool(answer["cleared"])


def topic_stats(drivers: Any, sdk: str, topic: str) -> Dict[str, Any]:
    """``topic``'s stats row as ``sdk`` reads it (the per-topic layout lists
    a topic once the server has indexed it: waited for)."""
    rows: Dict[str, Any] = {}

    def listed() -> bool:
        rows.update({t["topic"]: t for t in ok(drivers, sdk, {"op": "stats"})["topics"]})
        return topic in rows
    assert wait_until(listed), f"{sdk}: {topic} not in stats"
    return rows[topic]  # type: ignore[no-any-return]


@pytest.mark.parametrize("how", CONTROLLERS)
def test_each_controller_limits_for_every_sdk(how: str, drivers: Any, delayer_server: Any, http_server: Any,
                                              rds: Any, keys: Any) -> None:
    topic = f"limit-ctl-{how}-{uuid.uuid4().hex[:8]}"
    # A job that stays waiting keeps the topic in stats in both layouts.
    job_id = new_id("lim")
    ok(drivers, "python", {"op": "push", "topic": topic, "id": job_id, "delay_ms": 3_600_000, "body_b64": ""})
    set_limit(how, topic, 25, 7, drivers, delayer_server, http_server)
    for sdk in SDKS:
        flow = ok(drivers, sdk, {"op": "flow", "topic": topic})
        assert (flow["per_second"], flow["burst"]) == (25, 7), f"{sdk}: {flow}"
        row = topic_stats(drivers, sdk, topic)
        assert (row["per_second"], row["burst"]) == (25, 7), f"{sdk}: {row}"
        looked = ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]
        assert looked["flow"] == "limited", f"{sdk}: {looked}"
    assert clear_limit(how, topic, drivers, delayer_server, http_server) is True
    assert clear_limit(how, topic, drivers, delayer_server, http_server) is False, "no limit left to clear"
    for sdk in SDKS:
        flow = ok(drivers, sdk, {"op": "flow", "topic": topic})
        assert (flow["per_second"], flow["burst"]) == (None, None), f"{sdk}: {flow}"
        assert ok(drivers, sdk, {"op": "job", "topic": topic, "id": job_id})["job"]["flow"] == ""


def test_a_fractional_rate_reads_the_same_everywhere(drivers: Any, delayer_server: Any, rds: Any) -> None:
    """`30/min` is 0.5 jobs a second; the default burst is one whole job."""
    topic = f"limit-frac-{uuid.uuid4().hex[:8]}"
    done = cli(delayer_server, "limit", topic, "30/min", "--json")
    assert done.returncode == 0, done.stderr
    for sdk in SDKS:
        flow = ok(drivers, sdk, {"op": "flow", "topic": topic})
        assert (flow["per_second"], flow["burst"]) == (0.5, 1), f"{sdk}: {flow}"
    hourly = ok(drivers, "php", {"op": "set_rate_limit", "topic": topic, "per_second": 1 / 3, "burst": None})
    assert hourly["per_second"] == 1 / 3 and hourly["burst"] == 1, hourly
    assert ok(drivers, "rust", {"op": "flow", "topic": topic})["per_second"] == 1 / 3


BAD_LIMITS = [
    ("rate 0", 0, None, "a rate of 0 would stop the topic: pause it instead"),
    ("negative rate", -1, None, "more than 0"),
    ("rate over a million", 2e6, None, "at most 1000000"),
    ("rate under one a day", 1e-6, None, "at least one job a day"),
    ("burst 0", 10, 0, "burst must be a whole number"),
    ("burst over a million", 10, 2_000_000, "burst must be a whole number"),
    ("burst under 1% of the rate", 1000, 5, "at least 1% of the rate"),
]


@pytest.mark.parametrize("case,per_second,burst,says", BAD_LIMITS, ids=[c[0] for c in BAD_LIMITS])
def test_bad_limits_are_refused_alike_by_every_sdk_the_cli_and_http(
        case: str, per_second: float, burst: Optional[int], says: str, drivers: Any, delayer_server: Any,
        http_server: Any, rds: Any, keys: Any) -> None:
    topic = f"limit-bad-{uuid.uuid4().hex[:8]}"
    messages = set()
    for sdk in SDKS:
        r = drivers[sdk].request({"op": "set_rate_limit", "topic": topic, "per_second": per_second, "burst": burst})
        assert r["ok"] is False, f"{sdk} accepted {case}: {r}"
        kind, _, message = r["error"].partition(": ")
        assert kind == "invalid_argument", f"{sdk} refused {case} with {r['error']!r}"
        assert says in message, f"{sdk}: {message}"
        messages.add(message.partition(": ")[2])  # past the driver's name of the error
    assert len(messages) == 1, f"one message, the script's: {messages}"
    status, answer = http(http_server, "PUT", topic,
                          {"per_second": per_second, **({"burst": burst} if burst is not None else {})})
    assert status == 400 and says in json.dumps(answer), (status, answer)
    args = ["limit", topic, f"{per_second:.10g}/s"] + (["--burst", str(burst)] if burst is not None else [])
    done = cli(delayer_server, *args)
    assert done.returncode == 2 and says in done.stderr, (done.returncode, done.stderr)
    assert rds.exists(keys.flow(topic)) == 0, f"{case}: nothing is written"


def test_the_cli_wants_a_unit(delayer_server: Any) -> None:
    done = cli(delayer_server, "limit", "t", "100")
    assert done.returncode == 2 and "100/s" in done.stderr, done.stderr


def test_two_servers_make_a_limited_topics_jobs_ready_at_its_rate_each_once_in_due_order(
        drivers: Any, delayer_server: Any, http_server: Any, rds: Any, keys: Any) -> None:
    """20/s with a burst of 5, two servers: never more ready than the bucket
    allows since the limit was set; every job once, in due order."""
    topic = f"limit-two-{uuid.uuid4().hex[:8]}"
    rate, burst, jobs = 20.0, 5, 60
    started = time.monotonic()
    ok(drivers, "rust", {"op": "set_rate_limit", "topic": topic, "per_second": rate, "burst": burst})
    ids = [new_id("lim") for _ in range(jobs)]
    for delay, job_id in enumerate(ids):  # due 1 ms apart: due order is push order
        ok(drivers, "python", {"op": "push", "topic": topic, "id": job_id, "delay_ms": delay, "body_b64": ""})
    made_ready = 0
    deadline = time.monotonic() + 30
    while made_ready < jobs and time.monotonic() < deadline:
        made_ready = rds.llen(keys.ready(topic))
        allowed = burst + rate * (time.monotonic() - started)
        assert made_ready <= allowed + 1, f"{made_ready} ready after {time.monotonic() - started:.2f} s"
        time.sleep(0.02)
    assert made_ready == jobs, "not every job was made ready"
    held = ok(drivers, "php", {"op": "flow", "topic": topic})["held"]
    assert held == 0, f"nothing held once all are ready: {held}"
    out = [ok(drivers, sdk, {"op": "pop", "topic": topic})["job"]["id"] for sdk, _ in zip(SDKS * jobs, ids)]
    assert out == ids, "each once, in due order"
    assert ok(drivers, "rust", {"op": "pop", "topic": topic})["job"] is None


def test_held_jobs_are_counted_and_a_pause_on_top_holds_them_all(
        drivers: Any, delayer_server: Any, rds: Any, keys: Any) -> None:
    """One a day with a burst of 1: one job goes, the rest are held; a pause
    on top moves nothing more; a cleared limit, after the resume, lets the
    rest go at once."""
    topic = f"limit-held-{uuid.uuid4().hex[:8]}"
    ok(drivers, "python", {"op": "set_rate_limit", "topic": topic, "per_second": 1 / 86400, "burst": 1})
    for i in range(10):
        ok(drivers, "php", {"op": "push", "topic": topic, "id": new_id("held"), "delay_ms": i, "body_b64": ""})
    assert wait_until(lambda: rds.llen(keys.ready(topic)) == 1), "the burst's one job"
    held = lambda sdk: ok(drivers, sdk, {"op": "flow", "topic": topic})["held"]  # noqa: E731
    assert wait_until(lambda: all(held(sdk) == 9 for sdk in SDKS)), [held(sdk) for sdk in SDKS]
    for sdk in SDKS:
        assert topic_stats(drivers, sdk, topic)["held"] == 9, sdk
    assert ok(drivers, "rust", {"op": "pause", "topic": topic})["changed"]
    assert ok(drivers, "rust", {"op": "clear_rate_limit", "topic": topic})["changed"]
    time.sleep(TIMER_INTERVAL_MS / 1000 * 3)
    assert rds.llen(keys.ready(topic)) == 1, "paused: nothing more made ready"
    assert ok(drivers, "python", {"op": "resume", "topic": topic})["changed"]
    assert wait_until(lambda: rds.llen(keys.ready(topic)) == 10), "no limit left: the rest at once"
