"""Real processes for the conformance suite: redis-server, the delayer server,
and the four line-protocol drivers. No mocks: everything here is a real
process on 127.0.0.1, started on a free port and killed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import redis

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TARGET = REPO / "target" / "debug"

#: How long anything may take to come up, or a request to be answered
#: (on top of its own wait).
DEADLINE = 30.0


def wait_until(check: Callable[[], bool], deadline: float = DEADLINE, step: float = 0.01) -> bool:
    """Poll ``check`` until it is true or ``deadline`` seconds passed."""
    end = time.monotonic() + deadline
    while True:
        if check():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(step)


def free_port() -> int:
    """A loopback port nobody listens on right now (never 6379)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port


def _die_with_parent() -> None:
    """In the child: SIGKILL when pytest dies, even by SIGKILL (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def stop_process(proc: Optional[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM, wait up to ``grace`` s, then SIGKILL; always reaps."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)
    except ProcessLookupError:
        pass


def tail(path: Path, n: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace")


def cargo_build(package: str) -> None:
    """``cargo build -q -p <package>`` in the workspace (debug)."""
    subprocess.run(["cargo", "build", "-q", "-p", package], cwd=REPO, check=True, timeout=1800)


def binary(env_var: str, name: str, package: str) -> Path:
    """Path of a workspace binary: ``$env_var``, or target/debug/<name> (built if missing)."""
    given = os.environ.get(env_var)
    if given:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f"{env_var}={given} does not exist")
        return path
    path = TARGET / name
    if not path.exists():
        cargo_build(package)
    return path


@contextlib.contextmanager
def scratch_dir(prefix: str, what: str) -> Iterator[Path]:
    """A fresh temporary directory for a test session's files (``what``, as
    the message says), removed afterwards unless KEEP_TMP=1; a signal kills
    the processes the session started."""
    _kill_group_on_signal()
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        if os.environ.get("KEEP_TMP"):
            print(f"\n{what} kept in {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


def new_id(tag: str) -> str:
    """A job id no other test uses: ``<tag>:<12 hex digits>``."""
    return f"{tag}:{uuid.uuid4().hex[:12]}"


def ok(drivers: "Drivers", who: str, req: Dict[str, Any], timeout: float = 40) -> Dict[str, Any]:
    """Send ``req`` to driver ``who``; its response, which must be a success."""
    r: Dict[str, Any] = drivers[who].request(req, timeout=timeout)
    assert r["ok"] is True, f"{req['op']} by {who} failed: {r.get('error')}"
    return r


def redis_now(rds: "redis.Redis") -> float:
    """Redis's clock (TIME), Unix seconds."""
    s, us = rds.time()
    return float(s + us / 1e6)


class RedisServer:
    """A real redis-server on a free loopback port, persistence off."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            # No diskless-sync delay (5 s by default in Redis 7): a replica
            # (http_view.py's) syncs at once.
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), "--logfile", "redis.log", "--repl-diskless-sync-delay", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        if not wait_until(self._pings):
            self.stop()
            raise RuntimeError(f"redis-server on port {self.port} did not answer PING: {tail(self.dir / 'redis.log')}")

    def _pings(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited: {tail(self.dir / 'redis.log')}")
        try:
            with redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5) as r:
                return bool(r.ping())
        except redis.RedisError:
            return False

    def client(self) -> "redis.Redis":
        return redis.Redis(port=self.port, decode_responses=False, socket_timeout=30)

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


class DelayerServer:
    """The real ``delayer`` binary, configured for ``redis``'s port."""

    def __init__(self, workdir: Path, redis_server: RedisServer, prefix: str, timer_interval_ms: int,
                 layout: str = "classic", extra: str = "") -> None:
        self.exe = binary("DELAYER_BIN", "delayer", "delayer-server")
        self.dir = workdir / "server"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf = self.dir / "delayer.conf"
        self.conf.write_text(conf_text(redis_server, prefix, layout, f"timer_interval = {timer_interval_ms}\n"
                                                                     f"log_level = info\n{extra}"))
        self.log = self.dir / "server.log"
        self._log_file = open(self.log, "wb")
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            [str(self.exe), "-c", str(self.conf)],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        # Up means moving: a due probe job must reach its ready queue.
        r = redis_server.client()
        probe = "probe-" + uuid.uuid4().hex
        if layout == "topic":
            tag = prefix + "{conformance-probe}:"
            bucket, queue_key = tag + "job:" + probe, tag + "ready"
            r.hset(bucket, mapping={"topic": "conformance-probe", "body": ""})
            r.zadd(tag + "pool", {probe: 0})
            r.zadd(prefix + "due", {"conformance-probe": 0})
        else:
            bucket, queue_key = prefix + "job_bucket:" + probe, prefix + "ready_queue:conformance-probe"
            r.hset(bucket, mapping={"topic": "conformance-probe", "body": ""})
            r.zadd(prefix + "job_pool", {probe: 0})

        def moved() -> bool:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"delayer server exited: {tail(self.log)}")
            return r.lrem(queue_key, 0, probe) == 1

        if not wait_until(moved):
            self.stop()
            raise RuntimeError(f"delayer server did not move a due job: {tail(self.log)}")
        r.delete(bucket)
        r.close()

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
        self._log_file.close()


class DriverError(AssertionError):
    """A driver died or did not answer in time."""


class Driver:
    """One long-lived driver subprocess speaking the line protocol."""

    def __init__(self, name: str, argv: List[str], logdir: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.argv = argv
        self.log = logdir / f"driver-{name}.log"
        self._log_file = open(self.log, "ab")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file,
            env={**os.environ, **(env or {})}, bufsize=0, preexec_fn=_die_with_parent,
        )
        self._lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"driver-{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self._lines.put(line)
        except (OSError, ValueError):  # closed under us at stop()
            pass
        self._lines.put(None)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, req: Dict[str, Any], timeout: float = DEADLINE) -> Dict[str, Any]:
        """Send one request, return its response; DriverError after ``timeout`` s."""
        if not self.alive:
            raise DriverError(f"{self.name} driver is not running (exit {self.proc.returncode}): {tail(self.log)}")
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(req).encode("ascii") + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise DriverError(f"{self.name} driver: cannot send ({e}): {tail(self.log)}") from None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()  # its answer would be read as the next request's
            raise DriverError(f"{self.name} driver did not answer {req.get('op')} within {timeout} s") from None
        if line is None:
            raise DriverError(f"{self.name} driver exited (code {self.proc.poll()}): {tail(self.log)}")
        try:
            response = json.loads(line)
        except ValueError:
            raise DriverError(f"{self.name} driver answered non-JSON: {line[:300]!r}") from None
        if not isinstance(response, dict) or not isinstance(response.get("ok"), bool):
            raise DriverError(f"{self.name} driver answered {line[:300]!r}, not a response object")
        return response

    def stop(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        stop_process(self.proc, grace=3.0)
        self._reader.join(5)  # the process is gone: its stdout is at EOF
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log_file.close()


def conf_text(redis_server: RedisServer, prefix: str, layout: str, extra: str = "") -> str:
    """A delayer.conf for ``redis_server``, read by the server and the SDKs alike."""
    return (
        "[delayer]\n"
        f"key_prefix = {prefix}\n"
        f"layout = {layout}\n"
        f"{extra}"
        "\n[redis]\nhost = 127.0.0.1\n"
        f"port = {redis_server.port}\n"
        "database = 0\npassword =\n"
    )


def driver_argv(name: str, redis_server: RedisServer, prefix: str, layout: str = "classic",
                logdir: Optional[Path] = None) -> List[str]:
    """The command line of one driver. In the per-topic layout the SDK drivers
    read a delayer.conf that says so (raw1x, a 1.x client, has no layout)."""
    url = redis_server.url
    if name == "rust":
        program = [str(binary("DELAYER_DRIVER_BIN", "delayer-conformance-driver", "delayer-conformance-driver"))]
        connect = ["--url", url, "--prefix", prefix]
    elif name in ("python", "raw1x"):
        program = [sys.executable, str(HERE / "drivers" / f"{name}_driver.py")]
        connect = ["--url", url, "--prefix", prefix]
    elif name == "php":
        php = shutil.which(os.environ.get("PHP", "php"))
        if php is None:
            raise RuntimeError("php is not installed")
        autoload = REPO / "sdk-php" / "vendor" / "autoload.php"
        if not autoload.exists() and not os.environ.get("DELAYER_PHP_AUTOLOAD"):
            subprocess.run(["composer", "dump-autoload", "-q"], cwd=REPO / "sdk-php", check=True, timeout=300)
        program = [php, str(HERE / "drivers" / "php_driver.php")]
        connect = ["--host", "127.0.0.1", "--port", str(redis_server.port), "--prefix", prefix]
    else:
        raise ValueError(f"unknown driver {name!r}")
    if layout != "classic" and name != "raw1x":
        if logdir is None:
            raise ValueError("a driver in the per-topic layout needs a directory for its delayer.conf")
        conf = logdir / f"{name}-driver.conf"
        conf.write_text(conf_text(redis_server, prefix, layout))
        connect = ["--config", str(conf)]
    return program + connect


def config_driver_argv(name: str, config: Path) -> List[str]:
    """A driver on a delayer.conf (``config``) instead of a URL: sentinel and
    cluster deployments."""
    if name == "rust":
        exe = binary("DELAYER_DRIVER_BIN", "delayer-conformance-driver", "delayer-conformance-driver")
        return [str(exe), "--config", str(config)]
    if name == "python":
        return [sys.executable, str(HERE / "drivers" / "python_driver.py"), "--config", str(config)]
    php = shutil.which(os.environ.get("PHP", "php")) or "php"
    return [php, str(HERE / "drivers" / "php_driver.php"), "--config", str(config)]


@contextlib.contextmanager
def configured(d: Path, config_text: str, sdks: List[str], secret: str) -> Iterator[Dict[str, "Driver"]]:
    """The real server and one driver per SDK on one delayer.conf (in ``d``):
    a sentinel or cluster deployment's processes. Yields the drivers; on a
    normal exit checks that the server still runs and never logged ``secret``."""
    config = d / "delayer.conf"
    config.write_text(config_text)
    exe = binary("DELAYER_BIN", "delayer", "delayer-server")
    log = open(d / "server.log", "wb")
    server = subprocess.Popen([str(exe), "-c", str(config)], cwd=d, stdin=subprocess.DEVNULL, stdout=log,
                              stderr=subprocess.STDOUT)
    drivers = {name: Driver(f"{d.name}-{name}", config_driver_argv(name, config), d) for name in sdks}
    try:
        yield drivers
        assert server.poll() is None, f"the server exited: {tail(d / 'server.log')}"
        assert secret not in tail(d / "server.log", 1_000_000)
    finally:
        for driver in drivers.values():
            driver.stop()
        stop_process(server)
        log.close()


def through_the_server(drivers: Dict[str, "Driver"], pusher: str, consumer: str, kind: str, tag: str,
                       deadline_s: float) -> str:
    """``pusher`` pushes a job due now on topic ``<kind>-<pusher>-<consumer>-<tag>``,
    the server moves it, ``consumer`` pops it; a call failing while a failover
    is under way (a connection error) is made again. Returns the topic."""
    topic = f"{kind}-{pusher}-{consumer}-{tag}"
    job_id = f"{pusher}>{consumer}:{tag}"
    deadline = time.monotonic() + deadline_s
    pushed = False
    last: Any = None
    while time.monotonic() < deadline:
        if not pushed:
            last = drivers[pusher].request({"op": "push", "topic": topic, "id": job_id, "delay_ms": 0,
                                            "body_b64": "aGk="})
            pushed = last.get("ok") is True
        else:
            last = drivers[consumer].request({"op": "bpop", "topic": topic, "timeout_ms": 1000})
            if last.get("ok") and last.get("job") is not None:
                # (drivers may add id_b64 / topic_b64: the names' bytes)
                got = {k: last["job"].get(k) for k in ("id", "topic", "body_b64")}
                assert got == {"id": job_id, "topic": topic, "body_b64": "aGk="}, last["job"]
                return topic
        if not last.get("ok"):
            assert str(last.get("error", "")).startswith("connection"), f"{pusher}>{consumer}: {last}"
            time.sleep(0.1)
    raise AssertionError(f"{pusher}>{consumer} ({tag}): no job within the deadline; last answer {last}")


class Drivers:
    """The four drivers, started on first use and restarted if one died."""

    def __init__(self, redis_server: RedisServer, prefix: str, logdir: Path, layout: str = "classic") -> None:
        self.redis_server = redis_server
        self.prefix = prefix
        self.logdir = logdir
        self.layout = layout
        self._running: Dict[str, Driver] = {}

    def __getitem__(self, name: str) -> Driver:
        d = self._running.get(name)
        if d is None or not d.alive:
            if d is not None:
                d.stop()
            argv = driver_argv(name, self.redis_server, self.prefix, self.layout, self.logdir)
            d = Driver(name, argv, self.logdir)
            self._running[name] = d
        return d

    def stop_all(self) -> None:
        for d in self._running.values():
            try:
                d.stop()
            except Exception:  # keep stopping the others
                pass
        self._running.clear()


def _kill_group_on_signal() -> None:
    """SIGTERM to pytest (a CI timeout) still runs the fixtures' finalizers."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
