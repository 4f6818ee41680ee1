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
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "conformance"))

import harness  # noqa: E402
import podman  # noqa: E402

TOKEN = "container-test-token-0123456789"


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with harness.scratch_dir("delayer-container-", "container test files") as d:
        yield d


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


def compose_run_args(workdir: Path, http_port: int, metrics_port: int, redis_port: int) -> List[str]:
    """The server as deploy/compose.yaml runs it: the shipped configuration
    mounted read-only, its environment (addresses on loopback here, as the
    container shares the host's network), the token as a mounted secret."""
    service = yaml.safe_load((podman.REPO / "deploy" / "compose.yaml").read_text())["services"]["delayer"]
    env = dict(service["environment"])
    local = {
        "DELAYER_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DELAYER_HTTP_ADDR": f"127.0.0.1:{http_port}",
        "DELAYER_METRICS_ADDR": f"127.0.0.1:{metrics_port}",
    }
    assert set(env) == set(local) | {"DELAYER_HTTP_TOKEN_FILE"}, f"compose.yaml's environment changed: {env}"
    env.update(local)
    token = workdir / f"http_token-{uuid.uuid4().hex[:6]}"
    token.write_text(TOKEN + "\n")
    token.chmod(0o644)
    volumes = [v.replace("./", f"{podman.REPO / 'deploy'}/", 1) for v in service["volumes"]]
    return [*(f"-v{v}" for v in volumes), f"-v{token}:{env['DELAYER_HTTP_TOKEN_FILE']}:ro",
            *(f"-e{k}={v}" for k, v in env.items())]


def call(base: str, method: str, path: str, body: Any = None, timeout: float = harness.DEADLINE) -> Tuple[int, Any]:
    """One API request with the token; (status, parsed JSON)."""
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def serve(images: podman.Images, args: List[str], http_port: int) -> podman.Container:
    """A container of the image, once its API answers."""
    ctr = podman.Container(images.image, args)
    base = f"http://127.0.0.1:{http_port}"

    def answers() -> bool:
        if not ctr.running():
            raise AssertionError(f"the container exited: {ctr.logs()}")
        try:
            return call(base, "GET", "/v1/health", timeout=2)[0] == 200
        except OSError:
            return False

    try:
        assert harness.wait_until(answers, step=0.1), ctr.logs()
    except BaseException:
        ctr.remove()
        raise
    return ctr


def push_and_pop(http_port: int) -> None:
    """A job pushed through the API comes out of it once due, not before."""
    base = f"http://127.0.0.1:{http_port}"
    topic, job = f"ctr-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    status, pushed = call(base, "POST", f"/v1/topics/{topic}/jobs", {"id": job, "delay": 1, "body": "hello"})
    assert status == 201, pushed
    status, popped = call(base, "POST", f"/v1/topics/{topic}/pop", {"wait": 20}, timeout=harness.DEADLINE + 20)
    assert status == 200 and popped["job"] is not None, popped
    assert (popped["job"]["id"], popped["job"]["body"]) == (job, "hello")
    assert time.time() >= pushed["due"]


def assert_healthy(ctr: podman.Container, metrics_port: int) -> None:
    """The image's HEALTHCHECK passes, on the configuration's /readyz."""
    check = ctr.healthcheck()
    assert check.returncode == 0, (check.stdout, check.stderr, ctr.last_health_output(), ctr.logs())
    assert f"healthy: http://127.0.0.1:{metrics_port}/readyz: HTTP 200" in ctr.last_health_output()


def stop_cleanly(ctr: podman.Container) -> str:
    """podman stop (the image's STOPSIGNAL): exit 0, and it said so. Its log."""
    podman.podman("stop", "-t", "25", ctr.name, timeout=60)
    state, logs = ctr.state(), ctr.logs()
    assert (state["Running"], state["ExitCode"]) == (False, 0), logs
    assert "SIGTERM" in logs and "stopped" in logs, logs
    return logs


def test_the_image_keeps_the_published_layout(images: podman.Images) -> None:
    image = podman.inspect("image", images.image)
    config = image["Config"]
    assert config["User"] == f"{podman.NONROOT}:{podman.NONROOT}"
    assert config["StopSignal"] == "SIGTERM"
    assert config["Entrypoint"] == ["/usr/local/bin/delayer"]
    # podman shows the health check beside Config (docker inside it).
    assert (image.get("Healthcheck") or config["Healthcheck"])["Test"] == [
        "CMD", "/usr/local/bin/delayer", "health", "--ready"]
    assert {"8080/tcp", "9464/tcp"} <= set(config["ExposedPorts"])
    # The build stage the test replaces: a locked release build of the server.
    build = podman.CONTAINERFILE.read_text().split("\nFROM ${RUNTIME}")[0]
    assert "cargo build --release --locked -p delayer-server" in build


def test_as_compose_runs_it_push_pop_health_and_a_clean_sigterm(
    images: podman.Images, redis_server: Redis, workdir: Path
) -> None:
    http_port, metrics_port = harness.free_port(), harness.free_port()
    ctr = serve(images, compose_run_args(workdir, http_port, metrics_port, redis_server.port), http_port)
    try:
        # The process is the image's user, not root.
        pid = ctr.state()["Pid"]
        uids = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:"))
        assert uids.split()[1:] == [str(podman.NONROOT)] * 4, uids

        push_and_pop(http_port)
        assert_healthy(ctr, metrics_port)

        # What it runs with, as an operator would ask it: the token from the
        # secret, masked.
        shown = podman.podman("exec", ctr.name, "/usr/local/bin/delayer", "config", "--json").stdout
        settings = {(s["section"], s["key"]): s for s in json.loads(shown)["settings"]}
        token = settings[("delayer", "http_token")]
        assert token["source"] == "env DELAYER_HTTP_TOKEN_FILE" and TOKEN not in shown, token
        assert settings[("delayer", "layout")]["value"] == "topic"

        # Redis down: not ready, and the check says why; back: ready again.
        redis_server.stop()
        assert harness.wait_until(lambda: ctr.healthcheck().returncode == 1, step=0.5), ctr.last_health_output()
        assert "unhealthy" in ctr.last_health_output() and "503" in ctr.last_health_output()
        redis_server.start()
        assert harness.wait_until(lambda: ctr.healthcheck().returncode == 0, step=0.5), ctr.last_health_output()

        logs = stop_cleanly(ctr)
        assert "layout topic" in logs, logs
    finally:
        ctr.remove()


def test_with_no_configuration_file_the_environment_is_enough(
    images: podman.Images, redis_server: Redis, workdir: Path
) -> None:
    http_port, metrics_port = harness.free_port(), harness.free_port()
    token = workdir / f"token-{uuid.uuid4().hex[:6]}"
    token.write_text(TOKEN)
    token.chmod(0o644)
    env = {
        "DELAYER_REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "DELAYER_HTTP_ADDR": f"127.0.0.1:{http_port}",
        "DELAYER_HTTP_TOKEN_FILE": "/run/secrets/token",
        "DELAYER_METRICS_ADDR": f"127.0.0.1:{metrics_port}",
        "DELAYER_LAYOUT": "topic",
        "DELAYER_LOG_FORMAT": "json",
    }
    # An empty /etc/delayer hides the image's file (podman would copy it
    # into the tmpfs by default): defaults and environment only.
    args = ["--tmpfs", "/etc/delayer:notmpcopyup", f"-v{token}:/run/secrets/token:ro",
            *(f"-e{k}={v}" for k, v in env.items())]
    ctr = serve(images, args, http_port)
    try:
        push_and_pop(http_port)
        assert_healthy(ctr, metrics_port)
        logs = stop_cleanly(ctr)
        assert "no configuration file" in logs and "layout topic" in logs, logs
        # For a log pipeline: every line one JSON object.
        lines = [json.loads(line) for line in logs.splitlines() if line.strip()]
        assert lines and all({"ts", "level", "msg"} <= set(line) for line in lines), logs
        assert lines[-1]["msg"] == "stopped", lines[-1]
    finally:
        ctr.remove()
