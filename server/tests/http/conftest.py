"""Fixtures for the HTTP API and dashboard tests: one real redis-server and
one real ``delayer`` server with ``http_addr`` set, on free loopback ports,
shared by the tests and stopped at the end. The process helpers are the
conformance suite's (conformance/harness.py).

Environment knobs: DELAYER_BIN (the server binary, default target/debug/delayer,
built if missing), KEEP_TMP=1 (keep the logs).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "conformance"))

import harness  # noqa: E402
from browser import Browser, MissingTool  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"
PREFIX = "httptest:"


#: The shared server believes X-Forwarded-For from loopback, so a test can
#: be a client address of its own (the limiter counts per address).
TRUSTED = "127.0.0.1"


class HttpServer:
    """The real ``delayer`` binary with the HTTP API on. ``tokens``: with
    http_token and http_read_token (else none); ``extra``: more [delayer]
    lines; ``nofile``: the process's file descriptor limit."""

    def __init__(self, workdir: Path, redis_server: harness.RedisServer, prefix: str = PREFIX,
                 layout: str = "classic", name: str = "", tokens: bool = True, extra: str = "",
                 nofile: Optional[int] = None) -> None:
        self.exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
        self.dir = workdir / f"server-{name or layout}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = harness.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.conf = self.dir / "delayer.conf"
        auth = f"http_token = {TOKEN}\nhttp_read_token = {READ_TOKEN}\n" if tokens else ""
        self.conf.write_text(
            "[delayer]\ntimer_interval = 100\nlog_level = info\n"
            f"key_prefix = {prefix}\nlayout = {layout}\n"
            f"http_addr = 127.0.0.1:{self.port}\n{auth}http_trusted_proxies = {TRUSTED}\n{extra}"
            f"\n[redis]\nhost = 127.0.0.1\nport = {redis_server.port}\n"
        )
        self.log = self.dir / "server.log"
        self._log_file = open(self.log, "wb")

        def limited() -> None:
            harness._die_with_parent()
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [str(self.exe), "-c", str(self.conf)],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            preexec_fn=limited,
        )
        if not harness.wait_until(self._healthy, step=0.05):
            self.stop()
            raise RuntimeError(f"the HTTP API did not answer: {harness.tail(self.log)}")

    def _healthy(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"delayer exited: {harness.tail(self.log)}")
        try:
            return request(self.base, "GET", "/v1/health", token=None)[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        harness.stop_process(self.proc)
        self.proc = None
        self._log_file.close()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def raw_exchange(port: int, head: str, body: bytes = b"") -> bytes:
    """One request written on a socket as given (`head`, then `body`); what
    the server answers until it closes, or goes quiet for 5 s."""
    with socket.create_connection(("127.0.0.1", port), timeout=harness.DEADLINE) as s:
        s.sendall(head.encode() + body)
        s.settimeout(5)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass
        return got


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    """Headless Chromium, started as conformance/dashboard_view.py starts it
    (conformance/browser.py)."""
    try:
        chromium = Browser()
    except MissingTool as e:
        pytest.fail(str(e))
    try:
        yield chromium.driver
    finally:
        chromium.quit()


def sign_in(base: str, token: str, headers: Optional[Dict[str, str]] = None) -> Tuple[int, str, Dict[str, str]]:
    """POST /signin as the form does: (status, the session cookie's value or
    "", the response's headers)."""
    form = dict({"Content-Type": "application/x-www-form-urlencoded"}, **(headers or {}))
    raw = urllib.parse.urlencode({"token": token}).encode()
    status, _, got = request(base, "POST", "/signin", token=None, headers=form, raw=raw)
    cookie = got.get("set-cookie", "")
    value = cookie.split(";")[0].split("=", 1)[1] if cookie.startswith("delayer_session=") else ""
    return status, value, got


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are answers to check, not to follow."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def request(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    token: Optional[str] = TOKEN,
    headers: Optional[Dict[str, str]] = None,
    raw: Optional[bytes] = None,
) -> Tuple[int, Any, Dict[str, str]]:
    """One request; (status, parsed JSON or None, headers). Never raises on
    an HTTP error status. Header names are lowercase."""
    data = raw
    all_headers = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
    if body is not None or method not in ("GET", "HEAD"):
        # Every write says JSON, with a body or without (guard.rs).
        all_headers.setdefault("Content-Type", "application/json")
    if token is not None:
        all_headers.setdefault("Authorization", f"Bearer {token}")
    req = urllib.request.Request(base + path, data=data, method=method, headers=all_headers)
    try:
        with _OPENER.open(req, timeout=harness.DEADLINE) as resp:
            status, payload, got = resp.status, resp.read(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as e:
        status, payload, got = e.code, e.read(), {k.lower(): v for k, v in e.headers.items()}
    try:
        parsed = json.loads(payload) if payload else None
    except ValueError:
        parsed = payload.decode("utf-8", "replace")
    return status, parsed, got


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    harness._kill_group_on_signal()
    d = Path(tempfile.mkdtemp(prefix="delayer-http-"))
    yield d
    if os.environ.get("KEEP_TMP"):
        print(f"\nHTTP test logs kept in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server(workdir: Path) -> Iterator[harness.RedisServer]:
    server = harness.RedisServer(workdir)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[HttpServer]:
    s = HttpServer(workdir, redis_server)
    yield s
    s.stop()
