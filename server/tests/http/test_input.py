"""Every number a request gives, hostile: each numeric query and body
parameter of every route gets negative, huge (2^63, 2^64, 1e308),
non-numeric and mistyped values, and each is a 400 naming the problem, never
a 500 and never an ERROR line in the log. And a non-loopback metrics_addr
needs saying so, as http_addr does."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any, List, Tuple

import harness
from conftest import HttpServer, request

#: Query values no parameter takes.
BAD_QUERY = ["-1", str(2**63), str(2**64), str(10**30), "1e3", "1.5", "abc", "", "0x10", "NaN"]
#: JSON values no numeric field takes (raw JSON text).
BAD_JSON = ["-1", str(2**63), str(2**64), "1e308", "1e400", '"1"', "true", "[]", "{}", "-0.5"]


def query_cases(topic: str) -> List[Tuple[str, str]]:
    jobs = f"/v1/topics/{topic}/jobs"
    cases = []
    for state in ("scheduled", "ready", "reserved"):
        cases += [(f"{jobs}?state={state}&cursor={v}", f"cursor={v}") for v in BAD_QUERY]
        cases += [(f"{jobs}?state={state}&count={v}", f"count={v}") for v in BAD_QUERY + ["0", "1001"]]
    cases += [(f"/v1/topics/{topic}/dead?start={v}", f"start={v}") for v in BAD_QUERY]
    cases += [(f"/v1/topics/{topic}/dead?count={v}", f"count={v}") for v in BAD_QUERY + ["0", "1001"]]
    cases += [(f"/v1/history?seconds={v}", f"seconds={v}") for v in ["-1", str(2**64), "abc", "1.5"]]
    return cases


def body_cases(topic: str) -> List[Tuple[str, str]]:
    """(path, JSON text with one bad field)."""
    t = f"/v1/topics/{topic}"
    shapes = [
        (f"{t}/jobs", '{{"id": "a", "delay": {v}}}'),
        (f"{t}/jobs", '{{"id": "a", "delay": 1, "max_attempts": {v}}}'),
        (f"{t}/jobs", '{{"id": "a", "delay": 1, "ready_max_lifetime": {v}}}'),
        (f"{t}/jobs", '{{"id": "a", "delay": 1, "backoff": {{"kind": "fixed", "delay": {v}}}}}'),
        (f"{t}/jobs", '{{"id": "a", "delay": 1, "backoff": {{"kind": "exponential", "base": {v}, "max": 5}}}}'),
        (f"{t}/jobs", '{{"id": "a", "delay": 1, "backoff": {{"kind": "exponential", "base": 1, "max": {v}}}}}'),
        ("/v1/jobs", '{{"jobs": [{{"topic": "t", "id": "a", "delay": {v}}}]}}'),
        (f"{t}/pop", '{{"wait": {v}}}'),
        (f"{t}/reserve", '{{"ttr": {v}}}'),
        (f"{t}/reserve", '{{"ttr": 5, "wait": {v}}}'),
        (f"{t}/jobs/a/release", '{{"delay": {v}}}'),
        (f"{t}/jobs/a/touch", '{{"ttr": {v}}}'),
        (f"{t}/jobs/a/reschedule", '{{"delay": {v}}}'),
    ]
    return [(path, shape.format(v=v)) for path, shape in shapes for v in BAD_JSON]


def test_every_numeric_parameter_refuses_bad_numbers_with_a_400(server: HttpServer) -> None:
    topic = "input-" + uuid.uuid4().hex[:6]
    before = server.log_text().count("[ERROR]")
    wrong: List[Any] = []
    for path, what in query_cases(topic):
        status, data, _ = request(server.base, "GET", path)
        if status != 400 or data["error"]["code"] != "invalid_argument" or not data["error"]["message"]:
            wrong.append((path, what, status, data))
    for path, text in body_cases(topic):
        status, data, _ = request(server.base, "POST", path, raw=text.encode(),
                                  headers={"Content-Type": "application/json"})
        if status != 400 or data["error"]["code"] not in ("invalid_argument", "invalid_json"):
            wrong.append((path, text, status, data))
    assert not wrong, "\n".join(map(str, wrong[:20]))
    assert server.log_text().count("[ERROR]") == before, harness.tail(server.log)
    # The largest position taken still answers (an empty page).
    jobs = f"/v1/topics/{topic}/jobs"
    for path in (f"{jobs}?state=scheduled&cursor={2**53 - 1}", f"/v1/topics/{topic}/dead?start={2**53 - 1}"):
        status, data, _ = request(server.base, "GET", path)
        assert status == 200, (path, data)
    status, data, _ = request(server.base, "GET", f"{jobs}?state=scheduled&cursor={2**53}")
    assert status == 400 and "at most" in data["error"]["message"], data
    assert json.dumps(data)


def test_metrics_beyond_loopback_need_saying_so(workdir: Path, server: HttpServer) -> None:
    conf = workdir / "metrics-remote.conf"
    conf.write_text(f"[delayer]\nmetrics_addr = 0.0.0.0:{harness.free_port()}\n\n[redis]\nport = 1\n")
    run = subprocess.run([str(server.exe), "-c", str(conf)], capture_output=True, timeout=60)
    stderr = run.stderr.decode()
    assert run.returncode == 2 and "metrics_allow_remote = yes" in stderr, stderr
