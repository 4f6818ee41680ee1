"""The container image, run with podman: the published Containerfile's final
stage on a base of this machine's files (deploy/tests/podman.py says how and
why), the debug binary inside, the shipped configuration
(deploy/delayer.container.conf) with loopback addresses, against a real
redis-server on a free loopback port.

It pushes a job through the HTTP API in the container and pops it once the
server moved it, runs the image's HEALTHCHECK (healthy; unhealthy while
Redis is down; healthy again), checks the process runs as the fixed non-root
uid, and stops the container with its stop signal: exit 0, "stopped" logged.

Needs podman and runc (tools/install-deps.sh installs them); run as
root, as CI does. Environment: DELAYER_BIN (default target/debug/delayer),
KEEP_TMP=1 (keep the work directory).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "conformance"))

import harness  # noqa: E402
import podman  # noqa: E402

TOKEN = "container-test-token-0123456789"


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    harness._kill_group_on_signal()
    d = Path(tempfile.mkdtemp(prefix="delayer-container-"))
    yield d
    if os.environ.get("KEEP_TMP"):
        print(f"\ncontainer test files kept in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def images(workdir: Path) -> Iterator[podman.Images]:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: tools/install-deps.sh installs podman and runc")
    built = podman.Images(workdir, harness.binary("DELAYER_BIN", "delayer", "delayer-server"))
    try:
        yield built
    finally:
        built.remove()


class Redis:
    """A real redis-server on one loopback port, which can be stopped and
    started again on the same port (the server reconnects to it)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = harness.free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--logfile", "redis.log"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=harness._die_with_parent,
        )
        assert harness.wait_until(self._pings), f"redis-server did not start: {harness.tail(self.dir / 'redis.log')}"

    def _pings(self) -> bool:
        try:
            return subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True,
                                  timeout=5).stdout.strip() == "PONG"
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        harness.stop_process(self.proc)
        self.proc = None


@pytest.fixture
def redis_server(workdir: Path) -> Iterator[Redis]:
    server = Redis(workdir)
    yield server
    server.stop()


def container_conf(shipped: str, http_port: int, metrics_port: int, redis_port: int) -> str:
    """The shipped configuration, its addresses on loopback (the container
    shares the host's network here) and the API given a token."""
    edits = {
        "http_addr = 0.0.0.0:8080\n": f"http_addr = 127.0.0.1:{http_port}\nhttp_token = {TOKEN}\n",
        "metrics_addr = 0.0.0.0:9464\n": f"metrics_addr = 127.0.0.1:{metrics_port}\n",
        "url = redis://redis:6379/0\n": f"url = redis://127.0.0.1:{redis_port}/0\n",
    }
    for old, new in edits.items():
        assert shipped.count(old) == 1, f"deploy/delayer.container.conf no longer has {old!r}"
        shipped = shipped.replace(old, new)
    return shipped


def call(base: str, method: str, path: str, body: Any = None, timeout: float = harness.DEADLINE) -> Tuple[int, Any]:
    """One API request with the token; (status, parsed JSON)."""
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def answers(base: str, ctr: podman.Container) -> bool:
    if not ctr.running():
        raise AssertionError(f"the container exited: {ctr.logs()}")
    try:
        return call(base, "GET", "/v1/health", timeout=2)[0] == 200
    except OSError:
        return False


def test_the_image_keeps_the_published_layout(images: podman.Images) -> None:
    image = podman.inspect("image", images.image)
    config = image["Config"]
    assert config["User"] == f"{podman.NONROOT}:{podman.NONROOT}"
    assert config["StopSignal"] == "SIGTERM"
    assert config["Entrypoint"] == ["/usr/local/bin/delayer"]
    # podman shows the health check beside Config (docker inside it).
    assert (image.get("Healthcheck") or config["Healthcheck"])["Test"] == ["CMD", "/usr/local/bin/delayer", "health", "--ready"]
    assert {"8080/tcp", "9464/tcp"} <= set(config["ExposedPorts"])
    # The build stage the test replaces: a locked release build of the server.
    build = podman.CONTAINERFILE.read_text().split("\nFROM ${RUNTIME}")[0]
    assert "cargo build --release --locked -p delayer-server" in build


def test_push_pop_health_and_a_clean_sigterm(images: podman.Images, redis_server: Redis, workdir: Path) -> None:
    http_port, metrics_port = harness.free_port(), harness.free_port()
    conf = workdir / f"delayer-{uuid.uuid4().hex[:6]}.conf"
    shipped = (podman.REPO / "deploy" / "delayer.container.conf").read_text()
    conf.write_text(container_conf(shipped, http_port, metrics_port, redis_server.port))
    conf.chmod(0o644)
    ctr = podman.Container(images.image, ["-v", f"{conf}:/etc/delayer/delayer.conf:ro"])
    try:
        base = f"http://127.0.0.1:{http_port}"
        assert harness.wait_until(lambda: answers(base, ctr), step=0.1), ctr.logs()

        # The process is the image's user, not root.
        pid = ctr.state()["Pid"]
        uids = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:"))
        assert uids.split()[1:] == [str(podman.NONROOT)] * 4, uids

        # A job pushed through the API comes out of it once due, not before.
        topic, job = f"ctr-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        status, pushed = call(base, "POST", f"/v1/topics/{topic}/jobs", {"id": job, "delay": 1, "body": "hello"})
        assert status == 201, pushed
        status, popped = call(base, "POST", f"/v1/topics/{topic}/pop", {"wait": 20}, timeout=harness.DEADLINE + 20)
        assert status == 200 and popped["job"] is not None, popped
        assert (popped["job"]["id"], popped["job"]["body"]) == (job, "hello")
        assert time.time() >= pushed["due"]

        check = ctr.healthcheck()
        assert check.returncode == 0, (check.stdout, check.stderr, ctr.last_health_output(), ctr.logs())
        assert "healthy: http://127.0.0.1:" in ctr.last_health_output(), ctr.last_health_output()
        assert f":{metrics_port}/readyz: HTTP 200" in ctr.last_health_output(), ctr.last_health_output()

        # Redis down: not ready, and the check says why; back: ready again.
        redis_server.stop()
        assert harness.wait_until(lambda: ctr.healthcheck().returncode == 1, step=0.5), ctr.last_health_output()
        assert "unhealthy" in ctr.last_health_output() and "503" in ctr.last_health_output()
        redis_server.start()
        assert harness.wait_until(lambda: ctr.healthcheck().returncode == 0, step=0.5), ctr.last_health_output()

        podman.podman("stop", "-t", "25", ctr.name, timeout=60)
        state = ctr.state()
        logs = ctr.logs()
        assert (state["Running"], state["ExitCode"]) == (False, 0), logs
        assert "SIGTERM" in logs and "stopped" in logs, logs
    finally:
        ctr.remove()

