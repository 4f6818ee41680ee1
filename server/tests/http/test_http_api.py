"""The HTTP API against the real ``delayer`` binary and a real redis-server:
auth (no token, a wrong one, the read-only one, the dashboard's cookie and
its CSRF header), every route, the size limit, the SDKs' validation as JSON
errors, and health without a token."""

from __future__ import annotations

import base64
import re
import subprocess
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Dict, Tuple

import harness
from conftest import READ_TOKEN, TOKEN, HttpServer, raw_exchange, request, sign_in


def new(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}"


def call(server: HttpServer, method: str, path: str, body: Any = None, **kw: Any) -> Tuple[int, Any, Dict[str, str]]:
    return request(server.base, method, path, body, **kw)


def ok(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, data, _ = call(server, method, path, body)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def error(server: HttpServer, method: str, path: str, body: Any = None, status: int = 400, **kw: Any) -> Dict[str, Any]:
    got, data, _ = call(server, method, path, body, **kw)
    assert got == status, f"{method} {path}: {got} {data}"
    assert isinstance(data, dict) and set(data) == {"error"}, data
    assert isinstance(data["error"]["code"], str) and data["error"]["message"], data
    return dict(data["error"])


def q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def test_health_needs_no_token(server: HttpServer) -> None:
    status, data, _ = call(server, "GET", "/v1/health", token=None)
    assert (status, data["status"]) == (200, "ok")


def test_missing_wrong_and_read_only_tokens(server: HttpServer) -> None:
    topic = new("auth")
    status, data, headers = call(server, "GET", "/v1/stats", token=None)
    assert (status, data["error"]["code"], headers.get("www-authenticate")) == (401, "unauthorized", "Bearer")
    assert error(server, "GET", "/v1/stats", token=TOKEN + "x", status=401)["code"] == "unauthorized"
    assert error(server, "GET", "/v1/stats", token=TOKEN[:-1], status=401)["code"] == "unauthorized"
    assert error(server, "GET", "/v1/stats", token="", status=401)["code"] == "unauthorized"
    # The read-only token reads, and nothing else.
    assert call(server, "GET", "/v1/stats", token=READ_TOKEN)[0] == 200
    e = error(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "a", "delay": 1}, token=READ_TOKEN, status=403)
    assert e["code"] == "read_only"
    assert error(server, "DELETE", f"/v1/topics/{topic}/jobs/a", token=READ_TOKEN, status=403)["code"] == "read_only"
    assert ok(server, "GET", f"/v1/topics/{topic}/jobs/a")["state"] == "unknown"
    # Neither token ever shows up in the log.
    log = server.log.read_text(errors="replace")
    assert TOKEN not in log and READ_TOKEN not in log


def test_the_cookie_needs_the_dashboard_header_to_change_anything(server: HttpServer) -> None:
    topic = new("cookie")
    cookie = {"Cookie": f"delayer_session={sign_in(server.base, TOKEN)[1]}"}
    assert call(server, "GET", "/v1/stats", token=None, headers=cookie)[0] == 200
    push = {"id": "c1", "delay": 60}
    e = error(server, "POST", f"/v1/topics/{topic}/jobs", push, token=None, headers=cookie, status=403)
    assert e["code"] == "csrf"
    with_header = dict(cookie, **{"X-Delayer-Dashboard": "1"})
    assert call(server, "POST", f"/v1/topics/{topic}/jobs", push, token=None, headers=with_header)[0] == 201
    bad = {"Cookie": "delayer_session=not-a-session", "X-Delayer-Dashboard": "1"}
    assert error(server, "GET", "/v1/stats", token=None, headers=bad, status=401)["code"] == "unauthorized"


def test_push_then_lookup_shows_it_scheduled_with_its_due_time(server: HttpServer, redis_server: Any) -> None:
    topic, job = new("push"), new("order:42/a b")
    before = time.time()
    pushed = ok(server, "POST", f"/v1/topics/{q(topic)}/jobs", {"id": job, "delay": 600, "body": "<b>x</b>"}, 201)
    assert (pushed["id"], pushed["topic"]) == (job, topic)
    assert before + 590 < pushed["due"] < time.time() + 610
    info = ok(server, "GET", f"/v1/topics/{q(topic)}/jobs/{q(job)}")
    assert (info["state"], info["topic"], info["id"], info["body_size"]) == ("scheduled", topic, job, 8)
    assert abs(info["due"] - pushed["due"]) < 0.002
    # Another topic does not see it: ids are global, lookups are per topic.
    assert ok(server, "GET", f"/v1/topics/other-{q(topic)}/jobs/{q(job)}")["state"] == "unknown"
    # A binary body goes in as base64 and comes out the same.
    raw = bytes(range(256))
    ok(server, "POST", f"/v1/topics/{q(topic)}/jobs", {"id": job + "b", "delay": 0,
                                                        "body_base64": base64.b64encode(raw).decode()}, 201)
    got = None

    def popped() -> bool:
        nonlocal got
        got = ok(server, "POST", f"/v1/topics/{q(topic)}/pop")["job"]
        return got is not None

    assert harness.wait_until(popped, step=0.05)
    assert got is not None and base64.b64decode(got["body_base64"]) == raw and "body" not in got


def test_validation_is_the_sdks_and_errors_are_json(server: HttpServer) -> None:
    t = f"/v1/topics/{new('valid')}/jobs"
    assert "id must not be empty" in error(server, "POST", t, {"id": "", "delay": 1})["message"]
    assert "10-year limit" in error(server, "POST", t, {"id": "a", "delay": 316_000_000})["message"]
    assert "max_attempts" in error(server, "POST", t, {"id": "a", "delay": 1, "max_attempts": 2_000_000})["message"]
    e = error(server, "POST", t, {"id": "a", "delay": 1, "backoff": {"kind": "exponential", "base": 5, "max": 1}})
    assert "below the first delay" in e["message"]
    assert "ready_max_lifetime" in error(server, "POST", t, {"id": "a", "delay": 1, "ready_max_lifetime": 0.5})["message"]
    assert "delay" in error(server, "POST", t, {"id": "a", "delay": -1})["message"]
    assert "id is required" in error(server, "POST", t, {"delay": 1})["message"]
    assert "not both" in error(server, "POST", t, {"id": "a", "delay": 1, "body": "x", "body_base64": "eA=="})["message"]
    assert "base64" in error(server, "POST", t, {"id": "a", "delay": 1, "body_base64": "!!"})["message"]
    e = error(server, "POST", t, {"id": "a", "delai": 1})
    assert e["code"] == "invalid_json" and "delai" in e["message"]
    assert error(server, "POST", t, raw=b"{not json", headers={"Content-Type": "application/json"})["code"] == "invalid_json"
    e = error(server, "POST", t, raw=b'{"id":"a","delay":1}', headers={"Content-Type": "text/plain"}, status=415)
    assert e["code"] == "unsupported_media_type"
    assert error(server, "GET", t + "?state=later")["code"] == "invalid_argument"
    assert "1 to" in error(server, "GET", t + "?state=scheduled&count=0")["message"]
    assert error(server, "GET", "/v1/nothing-here", status=404)["code"] == "not_found"
    assert error(server, "PUT", "/v1/stats", status=405)["code"] == "method_not_allowed"


def test_request_size_limit(server: HttpServer) -> None:
    # Over the limit: refused from its Content-Length, before any byte of it.
    path = f"/v1/topics/{new('big')}/jobs"
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {16 * 1024 * 1024 + 1}\r\n\r\n")
    answer = raw_exchange(server.port, head)
    assert answer.startswith(b"HTTP/1.1 413 ") and b'"too_large"' in answer, answer[:300]
    # The same sent in chunks, without a length: refused once it passes the limit.
    big = b'{"id": "big", "delay": 1, "body": "' + b"x" * (16 * 1024 * 1024) + b'"}'
    chunked = head.replace(f"Content-Length: {16 * 1024 * 1024 + 1}", "Transfer-Encoding: chunked")
    answer = raw_exchange(server.port, chunked, f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413 ") and b'"too_large"' in answer, answer[:300]
    # Just under the limit is taken.
    body = "y" * (1024 * 1024)
    ok(server, "POST", f"/v1/topics/{new('big')}/jobs", {"id": "fits", "delay": 600, "body": body}, 201)


def test_if_absent_conflict_and_push_many(server: HttpServer) -> None:
    a, b = new("many-a"), new("many-b")
    ok(server, "POST", f"/v1/topics/{a}/jobs", {"id": a + "1", "delay": 600}, 201)
    e = error(server, "POST", f"/v1/topics/{a}/jobs", {"id": a + "1", "delay": 5, "if_absent": True}, status=409)
    assert e["code"] == "id_taken" and e["taken"][0]["id"] == a + "1" and e["taken"][0]["topic"] == a
    due = ok(server, "POST", "/v1/jobs", {"jobs": [{"topic": a, "id": a + "2", "delay": 600},
                                                   {"topic": b, "id": b + "1", "delay": 700, "body": "hi"}]})["due"]
    assert len(due) == 2 and due[1] - due[0] > 90
    assert ok(server, "GET", f"/v1/topics/{b}/jobs/{b}1")["state"] == "scheduled"
    assert "jobs[1]: topic is required" in error(server, "POST", "/v1/jobs", {"jobs": [
        {"topic": a, "id": "x", "delay": 1}, {"id": "y", "delay": 1}]})["message"]
    # Nothing of a refused batch was written.
    assert ok(server, "GET", f"/v1/topics/{a}/jobs/x")["state"] == "unknown"


def test_a_reserved_jobs_life_over_http(server: HttpServer) -> None:
    topic, job = new("life"), new("job")
    jobs = f"/v1/topics/{topic}/jobs"
    ok(server, "POST", jobs, {"id": job, "delay": 0, "body": "work", "max_attempts": 3,
                              "backoff": {"kind": "fixed", "delay": 0}}, 201)
    got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert got is not None and (got["id"], got["body"], got["attempts"], got["max_attempts"]) == (job, "work", 1, 3)
    info = ok(server, "GET", f"{jobs}/{job}")
    assert info["state"] == "reserved" and abs(info["deadline"] - got["deadline"]) < 0.002
    listed = ok(server, "GET", f"{jobs}?state=reserved")
    assert [i["id"] for i in listed["items"]] == [job]
    touched = ok(server, "POST", f"{jobs}/{job}/touch", {"receipt": got["receipt"], "ttr": 120})["deadline"]
    assert touched > got["deadline"] + 60
    assert "ttr is not taken here" in error(server, "POST", f"{jobs}/{job}/ack", {"ttr": 1})["message"]
    release = {"receipt": got["receipt"], "delay": 0, "error": "TimeoutError: slow"}
    assert ok(server, "POST", f"{jobs}/{job}/release", release)["released"] is True
    assert ok(server, "GET", f"{jobs}/{job}")["last_error"] == "TimeoutError: slow"
    got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert got is not None and got["attempts"] == 2
    assert ok(server, "POST", f"{jobs}/{job}/bury", {"receipt": got["receipt"], "error": "E: no"})["buried"] is True
    info = ok(server, "GET", f"{jobs}/{job}")
    assert (info["state"], info["dead_reason"], info["last_error"]) == ("dead", "buried", "E: no")
    dead = ok(server, "GET", f"/v1/topics/{topic}/dead")
    shown = [(d["id"], d["body"], d["reason"], d["last_error"]) for d in dead["dead"]]
    assert shown == [(job, "work", "buried", "E: no")]
    assert dead["next"] is None
    assert "say which" in error(server, "POST", f"/v1/topics/{topic}/dead/requeue", {})["message"]
    assert ok(server, "POST", f"/v1/topics/{topic}/dead/requeue", {"ids": [job]})["requeued"] == 1
    got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert got is not None and got["id"] == job
    assert ok(server, "POST", f"{jobs}/{job}/ack", {"receipt": got["receipt"]})["acked"] is True
    assert ok(server, "GET", f"{jobs}/{job}")["state"] == "unknown"
    assert ok(server, "POST", f"{jobs}/{job}/ack")["acked"] is False


def test_remove_reschedule_and_listings(server: HttpServer) -> None:
    topic = new("list")
    jobs = f"/v1/topics/{topic}/jobs"
    for i, delay in enumerate([900, 300, 600]):
        ok(server, "POST", jobs, {"id": f"j{i}", "delay": delay}, 201)
    page = ok(server, "GET", f"{jobs}?state=scheduled&count=2")
    items = list(page["items"])
    cursor = page["next"]
    while cursor is not None:
        page = ok(server, "GET", f"{jobs}?state=scheduled&count=2&cursor={cursor}")
        items += page["items"]
        cursor = page["next"]
    assert [i["id"] for i in items] == ["j1", "j2", "j0"]
    assert items[0]["due"] < items[1]["due"] < items[2]["due"]
    # Reschedule and remove act on this topic's job only.
    assert ok(server, "POST", f"/v1/topics/other-{topic}/jobs/j0/reschedule", {"delay": 5})["due"] is None
    due = ok(server, "POST", f"{jobs}/j0/reschedule", {"delay": 100})["due"]
    assert abs(ok(server, "GET", f"{jobs}/j0")["due"] - due) < 0.002
    assert ok(server, "DELETE", f"/v1/topics/other-{topic}/jobs/j1")["removed"] is False
    assert ok(server, "GET", f"{jobs}/j1")["state"] == "scheduled"
    assert ok(server, "DELETE", f"{jobs}/j1")["removed"] is True
    assert ok(server, "GET", f"{jobs}/j1")["state"] == "unknown"
    # Ready: due now, moved by the server.
    ok(server, "POST", f"{jobs}/j2/reschedule", {"delay": 0})
    assert harness.wait_until(lambda: ok(server, "GET", f"{jobs}/j2")["state"] == "ready", step=0.05)
    assert [i["id"] for i in ok(server, "GET", f"{jobs}?state=ready")["items"]] == ["j2"]
    stats = ok(server, "GET", "/v1/stats")
    mine = [t for t in stats["topics"] if t["topic"] == topic]
    assert mine == [{"topic": topic, "scheduled": 1, "ready": 1, "reserved": 0, "dead": 0, "paused": False,
                     "paused_since": None, "held": 0, "rate_limit": None}], mine
    history = ok(server, "GET", "/v1/history?seconds=120")
    assert len(history["samples"]) == 120
    assert harness.wait_until(lambda: topic in ok(server, "GET", "/v1/history")["topics"], step=0.1)


def test_pop_waits_and_purge_all(server: HttpServer) -> None:
    topic = new("pop")
    assert ok(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 0})["job"] is None
    assert "at most 60" in error(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 61})["message"]
    ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "p", "delay": 0.2, "body": "b"}, 201)
    got = ok(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 20})["job"]
    assert got == {"id": "p", "topic": topic, "body": "b", "traceparent": None}
    for i in range(3):
        ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": f"d{i}", "delay": 0}, 201)
    for i in range(3):
        got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
        assert got is not None
        ok(server, "POST", f"/v1/topics/{topic}/jobs/{got['id']}/bury")
    assert len(ok(server, "GET", f"/v1/topics/{topic}/dead?count=2")["dead"]) == 2
    assert ok(server, "GET", f"/v1/topics/{topic}/dead?count=2")["next"] == 2
    assert ok(server, "POST", f"/v1/topics/{topic}/dead/purge", {"ids": ["d0"]})["purged"] == 1
    assert ok(server, "POST", f"/v1/topics/{topic}/dead/purge", {"all": True})["purged"] == 2
    assert ok(server, "GET", f"/v1/topics/{topic}/dead")["dead"] == []


def test_dashboard_pages_sign_in_and_headers(server: HttpServer) -> None:
    status, page, headers = call(server, "GET", "/", token=None)
    assert status == 200 and 'name="token"' in page and "/assets/app.js" not in page
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, page, headers = call(server, "POST", "/signin", token=None, headers=form, raw=b"token=wrong-token-000000")
    assert status == 401 and "not valid" in page and "set-cookie" not in headers
    status, full, headers = sign_in(server.base, TOKEN)
    assert (status, headers["location"]) == (303, "/")
    assert headers["set-cookie"] == f"delayer_session={full}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200"
    status, page, _ = call(server, "GET", "/", token=None, headers={"Cookie": f"delayer_session={full}"})
    assert status == 200 and 'data-access="full"' in page and "/assets/app.js" in page
    read = sign_in(server.base, READ_TOKEN)[1]
    page = call(server, "GET", "/", token=None, headers={"Cookie": f"delayer_session={read}"})[1]
    assert 'data-access="read"' in page
    status, script, headers = call(server, "GET", "/assets/app.js", token=None)
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    # No inline script (the CSP would refuse it): every script is a file,
    # the page's and the sign-in page's, each served with the headers.
    signin_page = call(server, "GET", "/", token=None)[1]
    scripts = re.findall(r"<script[^>]*>", page + signin_page)
    sources = [m for tag in scripts for m in re.findall(r'src="(/assets/[a-z]+\.js)"', tag)]
    assert len(sources) == len(scripts) >= 5 and "/assets/signin.js" in sources, scripts
    # Nothing is fetched from elsewhere, and data never goes through innerHTML.
    for asset in ["/", "/assets/app.css"] + sources:
        status, text, headers = call(server, "GET", asset, token=None, headers={"Cookie": f"delayer_session={full}"})
        assert status == 200 and "script-src 'self'" in headers["content-security-policy"], asset
        assert "http://" not in text and "https://" not in text and "innerHTML" not in text, asset
        assert "insertAdjacentHTML" not in text and "outerHTML" not in text and "eval(" not in text, asset
    status, _, headers = call(server, "POST", "/signout", token=None)
    assert status == 303 and "Max-Age=0" in headers["set-cookie"]


def test_too_many_jobs_in_one_push_many(server: HttpServer) -> None:
    jobs = [{"topic": "many", "id": f"x{i}", "delay": 1} for i in range(10_001)]
    assert "at most 10000" in error(server, "POST", "/v1/jobs", {"jobs": jobs})["message"]


def test_a_remote_address_needs_saying_so_and_a_token(workdir: Path, server: HttpServer) -> None:
    """The server refuses to start (exit 2) instead of opening the API to a network."""
    port = harness.free_port()
    cases = [
        (f"http_addr = 0.0.0.0:{port}\n", "http_allow_remote = yes"),
        (f"http_addr = 0.0.0.0:{port}\nhttp_allow_remote = yes\n", "needs http_token"),
        (f"http_addr = 127.0.0.1:{port}\nhttp_token = short-Secret\n", "at least 16 characters"),
    ]
    for i, (keys, message) in enumerate(cases):
        conf = workdir / f"remote-{i}.conf"
        conf.write_text(f"[delayer]\n{keys}\n[redis]\nport = 1\n")
        run = subprocess.run([str(server.exe), "-c", str(conf)], capture_output=True, timeout=60)
        stderr = run.stderr.decode()
        assert run.returncode == 2 and message in stderr and "short-Secret" not in stderr, (keys, stderr)


def test_pause_and_resume_a_topic(server: HttpServer) -> None:
    """POST /v1/topics/{topic}/pause and /resume (issue 23): a full-access
    token; while paused, pop and reserve (waiting or not) hand out nothing,
    stats and the lookup say so; after the resume the job is handed out."""
    topic = new("paused")
    ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "j", "delay": 0, "body": "b"}, 201)
    assert error(server, "POST", f"/v1/topics/{topic}/pause", token=READ_TOKEN, status=403)["code"] == "read_only"
    state = ok(server, "POST", f"/v1/topics/{topic}/pause")
    assert (state["topic"], state["paused"], state["changed"]) == (topic, True, True), state
    assert isinstance(state["paused_since"], float), state
    assert ok(server, "POST", f"/v1/topics/{topic}/pause")["changed"] is False
    assert ok(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 0.5})["job"] is None
    assert ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30})["job"] is None
    [row] = [t for t in ok(server, "GET", "/v1/stats")["topics"] if t["topic"] == topic]
    assert (row["paused"], row["paused_since"]) == (True, state["paused_since"]), row
    assert ok(server, "GET", f"/v1/topics/{topic}/jobs/j")["flow"] == "paused"
    state = ok(server, "POST", f"/v1/topics/{topic}/resume")
    assert (state["paused"], state["paused_since"], state["changed"]) == (False, None, True), state
    assert ok(server, "POST", f"/v1/topics/{topic}/resume")["changed"] is False
    got = ok(server, "POST", f"/v1/topics/{topic}/pop", {"wait": 10})["job"]
    assert got is not None and got["id"] == "j", got


def test_set_and_clear_a_rate_limit(server: HttpServer) -> None:
    """PUT and DELETE /v1/topics/{topic}/limit (issue 23): a full-access
    token; the limit's rules are flow.lua's, whose refusal is a 400 with its
    message (nothing written); stats and the lookup say the limit; the
    answer counts the ready backlog the limit does not pace."""
    topic = new("limited")
    path = f"/v1/topics/{topic}/limit"
    ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "j", "delay": 600, "body": "b"}, 201)
    ok(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "r", "delay": 0, "body": "b"}, 201)
    assert harness.wait_until(lambda: ok(server, "GET", f"/v1/topics/{topic}/jobs/r")["state"] == "ready", step=0.05)
    assert error(server, "PUT", path, {"per_second": 5}, token=READ_TOKEN, status=403)["code"] == "read_only"
    assert error(server, "DELETE", path, token=READ_TOKEN, status=403)["code"] == "read_only"
    state = ok(server, "PUT", path, {"per_second": 0.5})
    assert state == {"topic": topic, "rate_limit": {"per_second": 0.5, "burst": 1}, "changed": True,
                     "ready_backlog": 1}, state
    assert ok(server, "PUT", path, {"per_second": 0.5})["changed"] is False
    state = ok(server, "PUT", path, {"per_second": 50, "burst": 10})
    assert (state["rate_limit"], state["changed"]) == ({"per_second": 50, "burst": 10}, True), state
    [row] = [t for t in ok(server, "GET", "/v1/stats")["topics"] if t["topic"] == topic]
    assert row["rate_limit"] == {"per_second": 50, "burst": 10} and row["paused"] is False, row
    assert ok(server, "GET", f"/v1/topics/{topic}/jobs/j")["flow"] == "limited"
    for body, says in [
        ({"per_second": 0}, "a rate of 0 would stop the topic: pause it instead"),
        ({"per_second": -1}, "the rate must be more than 0"),
        ({"per_second": 5, "burst": 0}, "the burst must be a whole number of jobs from 1 to 1000000"),
        ({"per_second": 5000, "burst": 1}, "at least 1% of the rate"),
        ({}, "per_second is required"),
        ({"burst": 5}, "per_second is required"),
        ({"per_second": "50"}, "per_second"),
        ({"per_second": 5, "burst": 1.5}, "burst"),
        ({"per_second": 5, "rate": 1}, "rate"),
    ]:
        e = error(server, "PUT", path, body)
        assert says in e["message"], (body, e)
    status, data, _ = request(server.base, "PUT", path, None, raw=b"{not json")
    assert status == 400, (status, data)
    [row] = [t for t in ok(server, "GET", "/v1/stats")["topics"] if t["topic"] == topic]
    assert row["rate_limit"] == {"per_second": 50, "burst": 10}, "refusals changed nothing"
    assert ok(server, "DELETE", path) == {"topic": topic, "cleared": True}
    assert ok(server, "DELETE", path) == {"topic": topic, "cleared": False}
    [row] = [t for t in ok(server, "GET", "/v1/stats")["topics"] if t["topic"] == topic]
    assert row["rate_limit"] is None, row
    assert ok(server, "GET", f"/v1/topics/{topic}/jobs/j")["flow"] == ""
