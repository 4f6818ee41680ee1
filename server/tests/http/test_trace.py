"""Trace context over the HTTP API (issue 22): a push takes ``traceparent``
as a body field or, on a single push, as the request's ``traceparent``
header (the body's wins); pop, reserve and job lookup return it (null when
absent); a malformed one is a 400 and nothing is written."""

from __future__ import annotations

import uuid
from typing import Any, Dict

from conftest import HttpServer, request

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def ok(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200, **kw: Any) -> Any:
    got, data, _ = request(server.base, method, path, body, **kw)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def test_push_keeps_it_and_pop_reserve_and_lookup_return_it(server: HttpServer) -> None:
    topic = f"trace-{uuid.uuid4().hex[:10]}"
    jobs = f"/v1/topics/{topic}/jobs"
    ok(server, "POST", jobs, {"id": "body", "delay": 0, "traceparent": TP}, 201)
    ok(server, "POST", jobs, {"id": "header", "delay": 0}, 201, headers={"traceparent": TP})
    ok(server, "POST", jobs, {"id": "both", "delay": 0, "traceparent": OTHER}, 201, headers={"traceparent": TP})
    ok(server, "POST", "/v1/jobs", {"jobs": [{"topic": topic, "id": "many", "delay": 0, "traceparent": TP},
                                            {"topic": topic, "id": "none", "delay": 0}]})
    assert ok(server, "GET", f"{jobs}/header")["traceparent"] == TP
    assert ok(server, "GET", f"{jobs}/both")["traceparent"] == OTHER, "the body's wins"
    assert ok(server, "GET", f"{jobs}/none")["traceparent"] is None
    seen: Dict[str, Any] = {}
    for _ in range(5):
        for route, body in (("pop", {"wait": 10}), ("reserve", {"ttr": 30, "wait": 10})):
            if len(seen) < 5:
                job = ok(server, "POST", f"/v1/topics/{topic}/{route}", body)["job"]
                assert job is not None
                seen[job["id"]] = job["traceparent"]
    assert seen == {"body": TP, "header": TP, "both": OTHER, "many": TP, "none": None}


def test_a_malformed_traceparent_is_refused(server: HttpServer) -> None:
    topic = f"trace-bad-{uuid.uuid4().hex[:10]}"
    jobs = f"/v1/topics/{topic}/jobs"
    bad = TP.upper()
    for body, headers in (({"id": "a", "delay": 0, "traceparent": bad}, {}),
                          ({"id": "a", "delay": 0}, {"traceparent": bad})):
        got, data, _ = request(server.base, "POST", jobs, body, headers=headers)
        assert got == 400 and "traceparent" in data["error"]["message"], data
    got, data, _ = request(server.base, "POST", "/v1/jobs", {"jobs": [
        {"topic": topic, "id": "b", "delay": 0}, {"topic": topic, "id": "c", "delay": 0, "traceparent": "00-x"}]})
    assert got == 400 and data["error"]["message"].startswith("jobs[1]: traceparent"), data
    for job_id in "abc":
        assert ok(server, "GET", f"{jobs}/{job_id}")["state"] == "unknown"
