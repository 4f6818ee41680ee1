"""Other web pages against the API, in a real browser (headless Chromium)
and with raw requests (guard.rs): a page served on ANOTHER loopback port
sends the "simple" requests a browser lets any page send (no-cors fetches,
a text/plain form) to a server without http_token, and nothing changes; a
request naming another Host (DNS rebinding) is refused; the server says at
start that it runs without a token."""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import harness
from conftest import HttpServer, raw_exchange, request

ALLOWED = "delayer.test"


@pytest.fixture(scope="module")
def open_server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[HttpServer]:
    """A server with no token at all: the case the Host and Content-Type
    rules protect."""
    s = HttpServer(workdir, redis_server, prefix="httpcsrf:", name="csrf", tokens=False,
                   extra=f"http_allowed_hosts = {ALLOWED}\n")
    yield s
    s.stop()


def attacker_page(api: str, topic: str) -> str:
    """What a page of another site can send without asking (no preflight)."""
    t = f"{api}/v1/topics/{topic}"
    shots = [
        (f"{t}/pop", None, None),
        (f"{t}/jobs/reserved/ack", None, None),
        (f"{t}/jobs/reserved/bury", None, None),
        (f"{t}/jobs/scheduled/reschedule", "text/plain", '{"delay": 0}'),
        (f"{t}/jobs", "text/plain", '{"id": "evil", "delay": 0}'),
        (f"{t}/jobs", "application/x-www-form-urlencoded", '{"id": "evil2", "delay": 0}'),
        (f"{t}/dead/purge", "text/plain", '{"all": true}'),
        (f"{api}/signin", "application/x-www-form-urlencoded", "token=anything-at-all-0000"),
    ]
    fetches = ",\n".join(
        f"fetch({json.dumps(url)}, {{method: 'POST', mode: 'no-cors'"
        + (f", headers: {{'Content-Type': {json.dumps(kind)}}}, body: {json.dumps(body)}" if kind else "")
        + "})"
        for url, kind, body in shots
    )
    return f"""<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="post" action="{t}/pop" enctype="text/plain" target="sink">
<input name='{{"x": "' value='"}}'></form>
<script>
Promise.allSettled([{fetches}]).then(() => {{
  document.getElementById("sink").onload = () => {{ document.title = "done"; }};
  document.getElementById("form").submit();
}});
</script></body></html>"""


class Page(http.server.BaseHTTPRequestHandler):
    html = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = self.html.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def state(server: HttpServer, topic: str, job: str) -> Any:
    status, data, _ = request(server.base, "GET", f"/v1/topics/{topic}/jobs/{job}", token=None)
    assert status == 200, data
    return data


def test_a_page_on_another_port_cannot_pop_ack_bury_or_push(open_server: HttpServer, browser: WebDriver) -> None:
    server, topic = open_server, "csrf-" + uuid.uuid4().hex[:6]
    jobs = f"/v1/topics/{topic}/jobs"
    # One job reserved, one ready, one waiting.
    assert request(server.base, "POST", jobs, {"id": "reserved", "delay": 0}, token=None)[0] == 201
    got = request(server.base, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 600, "wait": 10}, token=None)[1]["job"]
    assert got is not None and got["id"] == "reserved", got
    for job, delay in (("ready", 0), ("scheduled", 3600)):
        assert request(server.base, "POST", jobs, {"id": job, "delay": delay}, token=None)[0] == 201
    assert harness.wait_until(lambda: state(server, topic, "ready")["state"] == "ready", step=0.05)
    due = state(server, topic, "scheduled")["due"]

    # The page, served on another loopback port: another origin, same site.
    Page.html = attacker_page(server.base, topic)
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{site.server_address[1]}/")
        WebDriverWait(browser, harness.DEADLINE, poll_frequency=0.1).until(lambda d: d.title == "done")
    finally:
        site.shutdown()
        site.server_close()

    assert state(server, topic, "ready")["state"] == "ready", "popped by the page"
    assert state(server, topic, "reserved")["state"] == "reserved", "acked or buried by the page"
    assert state(server, topic, "scheduled")["due"] == due, "rescheduled by the page"
    for evil in ("evil", "evil2"):
        assert state(server, topic, evil)["state"] == "unknown", f"{evil} pushed by the page"
    assert browser.get_cookie("delayer_session") is None, "signed in by the page"


def raw_get(server: HttpServer, host: str) -> bytes:
    return raw_exchange(server.port, f"GET /v1/stats HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")


def test_a_request_for_another_host_is_refused(open_server: HttpServer) -> None:
    """DNS rebinding: a page's own name, resolved to 127.0.0.1, is in Host."""
    for host in ("attacker.example", f"attacker.example:{open_server.port}", "127.0.0.1.attacker.example"):
        answer = raw_get(open_server, host)
        assert answer.startswith(b"HTTP/1.1 403 ") and b'"host_not_allowed"' in answer, (host, answer[:200])
    for host in (f"127.0.0.1:{open_server.port}", "localhost", f"[::1]:{open_server.port}", f"{ALLOWED}:80"):
        assert raw_get(open_server, host).startswith(b"HTTP/1.1 200 "), host


def test_writes_need_a_json_content_type_and_no_token_is_said(open_server: HttpServer) -> None:
    topic = "ctype-" + uuid.uuid4().hex[:6]
    for kind in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        if kind is None:
            status, data = raw_post_without_type(open_server, f"/v1/topics/{topic}/pop")
        else:
            status, data, _ = request(open_server.base, "POST", f"/v1/topics/{topic}/pop", token=None,
                                      headers={"Content-Type": kind}, raw=b"")
        assert (status, data["error"]["code"]) == (415, "unsupported_media_type"), (kind, status, data)
    assert request(open_server.base, "POST", f"/v1/topics/{topic}/pop", token=None)[0] == 200
    assert "takes no token" in open_server.log_text()


def raw_post_without_type(server: HttpServer, path: str) -> Any:
    got = raw_exchange(server.port, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
                                    "Connection: close\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)
