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
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "conformance"))

import harness  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"
PREFIX = "httptest:"


class HttpServer:
    """The real ``delayer`` binary with the HTTP API on."""

    def __init__(self, workdir: Path, redis_server: harness.RedisServer, prefix: str = PREFIX,
                 layout: str = "classic") -> None:
        self.exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
        self.dir = workdir / f"server-{layout}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = harness.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.conf = self.dir / "delayer.conf"
        self.conf.write_text(
            "[delayer]\ntimer_interval = 100\nlog_level = info\n"
            f"key_prefix = {prefix}\nlayout = {layout}\n"
            f"http_addr = 127.0.0.1:{self.port}\nhttp_token = {TOKEN}\nhttp_read_token = {READ_TOKEN}\n"
            f"\n[redis]\nhost = 127.0.0.1\nport = {redis_server.port}\n"
        )
        self.log = self.dir / "server.log"
        self._log_file = open(self.log, "wb")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [str(self.exe), "-c", str(self.conf)],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            preexec_fn=harness._die_with_parent,
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
