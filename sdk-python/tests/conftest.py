"""Fixtures: a real redis-server on a free loopback port (no fakes)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator, List, Optional, Sequence, Tuple, TypeVar

import pytest
import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from delayer.keys import Keys

REPO_ROOT = Path(__file__).resolve().parents[2]
LUA_DIR = REPO_ROOT / "lua"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    """A port nobody listens on right now (bind to port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process, started for the tests and killed afterwards.

    ``tls`` = ``(cert, key, ca)`` serves TLS only (``--port 0``); ``args`` are
    extra redis-server arguments (ACL users, a unix socket, ...).
    """

    def __init__(
        self,
        password: Optional[str] = None,
        *,
        args: Sequence[str] = (),
        tls: Optional[Tuple[Path, Path, Path]] = None,
        socket_path: Optional[Path] = None,
    ) -> None:
        self.password = password
        self.args = list(args)
        self.tls = tls
        self.socket_path = socket_path
        self.dir = tempfile.mkdtemp(prefix="delayer-redis-")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.port = 0
        for _ in range(5):  # another process may grab the free port first
            self.port = free_port()
            if self._start():
                return
        raise RuntimeError("could not start redis-server")

    def _start(self) -> bool:
        os.makedirs(self.dir, exist_ok=True)
        args: List[str] = [REDIS_SERVER]
        if self.tls is None:
            args += ["--port", str(self.port)]
        else:
            cert, key, ca = self.tls
            args += [
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(cert),
                "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(ca),
                "--tls-auth-clients", "no",
            ]
        args += [
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
            "--daemonize", "no",
            "--loglevel", "warning",
        ]
        if self.password is not None:
            args += ["--requirepass", self.password]
        if self.socket_path is not None:
            args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        args += self.args
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # first: something listens
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        # No retries: redis-py 6+ retries an AuthenticationError (the ACL
        # servers' answer) with backoff, seconds per server for nothing.
        probe = self.client(socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    if probe.ping() and (self.socket_path is None or self.socket_path.exists()):
                        return True
                except (redis.AuthenticationError, redis.ResponseError):
                    return True  # it answers: "default" is off in the ACL tests
                except redis.ConnectionError:
                    pass
                time.sleep(0.02)
        finally:
            probe.close()
        self.stop()
        return False

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self, **kwargs: Any) -> "redis.Redis":
        """A plain redis-py client (over TLS, trusting the test CA, for a TLS server)."""
        if self.tls is not None:
            kwargs.setdefault("ssl", True)
            kwargs.setdefault("ssl_ca_certs", str(self.tls[2]))
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kwargs)

    def halt(self) -> None:
        """Shut redis-server down (SIGTERM, as a service manager would): its
        clients' connections are closed and nothing listens on the port."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def start_again(self) -> None:
        """Start redis-server again on the same port, after :meth:`halt`
        (with an empty dataset: nothing is saved). Returns once it answers."""
        deadline = time.monotonic() + 30
        while not self._start():  # the port may take a moment to be free again
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not start redis-server again on port {self.port}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def make_certificates(dir: Path) -> Tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it (openssl CLI).

    Returns ``(server cert, server key, CA cert)``, PEM files in ``dir``.
    """

    def openssl(*args: str) -> None:
        out = subprocess.run(["openssl", *args], cwd=dir, capture_output=True)
        assert out.returncode == 0, f"openssl {args}: {out.stderr.decode(errors='replace')}"

    # Python 3.13 verifies strictly (VERIFY_X509_STRICT): the CA needs its key
    # usage, the leaf its Authority Key Identifier.
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=delayer test CA", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")
    (dir / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nauthorityKeyIdentifier=keyid,issuer\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return dir / "server.pem", dir / "server.key", dir / "ca.pem"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def auth_server() -> Iterator[RedisServer]:
    server = RedisServer(password="s3cret-PASSWORD")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path, Path]:
    """``(server cert, server key, CA cert)`` made for this run."""
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def tls_server(certs: Tuple[Path, Path, Path]) -> Iterator[RedisServer]:
    """A redis-server that speaks TLS only, with a certificate of the test CA."""
    server = RedisServer(tls=certs)
    try:
        yield server
    finally:
        server.stop()


ACL_USER = "delayer"
ACL_PASSWORD = "acl-pw-Secret-42"


@pytest.fixture(scope="session")
def acl_server() -> Iterator[RedisServer]:
    """A redis-server whose only user is ``delayer``, limited to ``delayer:*`` keys."""
    server = RedisServer(args=[
        "--user", "default", "off",
        "--user", ACL_USER, "on", f">{ACL_PASSWORD}", "~delayer:*", "+@all", "-@admin", "-@dangerous",
    ])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def socket_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server also listening on a unix socket (``server.socket_path``)."""
    server = RedisServer(socket_path=tmp_path_factory.mktemp("sock") / "redis.sock")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may halt and start again."""
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator["redis.Redis"]:
    """A plain redis-py client on an emptied database."""
    client = redis_server.client()
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def wake(raw: "redis.Redis") -> Iterator[Any]:
    """A listener on the wake channel of the per-topic layout's tests (key
    prefix ``shop:``): what pushes, reserves and touches published."""
    from topickit import WakeListener

    listener = WakeListener(raw, "shop:")
    try:
        yield listener
    finally:
        listener.close()


@pytest.fixture
def url(redis_server: RedisServer, raw: "redis.Redis") -> str:
    """The URL of the (emptied) test Redis."""
    return redis_server.url


async def aclose(client: "aioredis.Redis") -> None:
    """Close an asyncio client on every redis-py the package allows (aclose: 5.0.1+)."""
    closer = getattr(client, "aclose", None)
    await (closer() if closer is not None else client.close())


def move(raw: "redis.Redis", prefix: str = "delayer:", batch: int = 1000) -> List[object]:
    """Run the real server's move.lua once; return its reply."""
    script = (LUA_DIR / "move.lua").read_bytes()
    k = Keys(prefix)
    reply = raw.eval(
        script, 5, k.job_pool, k.malformed, k.scheduled_count, k.topics, k.reserved,
        k.bucket_prefix, k.ready_queue_prefix, batch,
    )
    assert isinstance(reply, list)
    return reply


def move_until(raw: "redis.Redis", count: int, prefix: str = "delayer:", within: float = 5.0) -> int:
    """Run move.lua until ``count`` ids were taken off the pool (polling, with a deadline)."""
    taken = 0
    deadline = time.monotonic() + within
    while True:
        taken += int(move(raw, prefix)[0])  # type: ignore[call-overload]
        if taken >= count:
            return taken
        if time.monotonic() > deadline:
            raise AssertionError(f"only {taken} of {count} ids became due within {within} s")
        time.sleep(0.01)


def redis_now(raw: "redis.Redis") -> float:
    sec, usec = raw.time()
    return sec + usec / 1e6


def reserved_deadline(raw: "redis.Redis", job_id: str, prefix: str = "delayer:") -> Optional[float]:
    """A reservation's deadline in seconds, as the reserved set keeps it (in ms)."""
    score = raw.zscore(prefix + "reserved", job_id)
    return None if score is None else score / 1000


def wait_until_past(raw: "redis.Redis", due: float, within: float = 5.0) -> None:
    """Poll Redis's clock until it is past ``due``."""
    deadline = time.monotonic() + within
    while redis_now(raw) <= due:
        if time.monotonic() > deadline:
            raise AssertionError("Redis's clock did not reach the due time")
        time.sleep(0.01)


T = TypeVar("T")


def run(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run an async test body to completion (one event loop per test)."""
    return asyncio.run(fn())


def bucket(job_id: str, prefix: str = "delayer:") -> str:
    """The job's bucket key (docs/PROTOCOL.md)."""
    return f"{prefix}job_bucket:{job_id}"
