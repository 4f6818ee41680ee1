"""A local Redis Sentinel deployment for failover tests (the Python twin of
testkit/src/sentinel.rs): one master, one replica and three sentinels, all
``redis-server`` processes on free loopback ports (never 6379), stopped by
:meth:`Sentinels.stop`.

Used by sdk-python's tests and the conformance suite (import it after
putting this directory on ``sys.path``), and by PHP's tests as a program::

    python3 testkit/sentinel.py <dir>

starts the deployment (env ``SENTINEL_REDIS_PASSWORD``: the master's
password; ``SENTINEL_TLS=cert,key,ca``: TLS only), prints one JSON line (``nodes``, ``master_name``,
``ports``) and then obeys lines on stdin: ``kill-master`` (answers
``{"master": <port>}`` once the replica has taken over) and ``stop``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import redis

MASTER_NAME = "delayer-master"
#: How long a failover may take on a slow, loaded machine.
FAILOVER_DEADLINE = 60.0

_given: set = set()


def free_port() -> int:
    """A loopback port nobody listens on, not handed out before by this process."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given and port != 6379:
            _given.add(port)
            return port


def wait_until(check: Callable[[], bool], deadline: float = FAILOVER_DEADLINE) -> bool:
    end = time.monotonic() + deadline
    while True:
        try:
            if check():
                return True
        except redis.RedisError:
            pass
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


class Sentinels:
    """One master, one replica, three sentinels (quorum 2, down after 1 s)."""

    def __init__(self, workdir: Optional[Path] = None, redis_password: Optional[str] = None,
                 sentinel_password: Optional[str] = None, tls: Optional[Tuple[Path, Path, Path]] = None) -> None:
        """``tls`` = (server certificate, key, CA): TLS only, everywhere."""
        self.dir = Path(tempfile.mkdtemp(prefix="delayer-sentinels-", dir=workdir))
        self.redis_password = redis_password
        self.sentinel_password = sentinel_password
        self.tls = tls
        self.procs: Dict[int, subprocess.Popen] = {}
        self.node_ports = [free_port(), free_port()]
        self.sentinel_ports = [free_port() for _ in range(3)]
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed")
        try:
            auth = ["--requirepass", redis_password, "--masterauth", redis_password] if redis_password else []
            listen = {port: ["--port", str(port)] for port in self.node_ports + self.sentinel_ports}
            tls_conf = ""
            if tls is not None:
                cert, key, ca = (str(p) for p in tls)
                files = ["--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca,
                         "--tls-auth-clients", "no", "--tls-replication", "yes"]
                listen = {port: ["--port", "0", "--tls-port", str(port), *files] for port in listen}
                tls_conf = (f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n"
                            "tls-auth-clients no\ntls-replication yes\n")
            for i, port in enumerate(self.node_ports):
                args = [exe, *listen[port], "--bind", "127.0.0.1", "--dir", str(self.dir),
                        "--dbfilename", f"node-{port}.rdb", "--logfile", f"node-{port}.log", "--save", "",
                        "--appendonly", "no", *auth]
                # No diskless-sync delay (5 s by default in Redis 7): whichever
                # node is master syncs a replica at once, also after a failover.
                args += ["--repl-diskless-sync-delay", "0"]
                if i == 1:
                    args += ["--replicaof", "127.0.0.1", str(self.node_ports[0])]
                self._spawn(port, args)
            for i, port in enumerate(self.sentinel_ports):
                conf = self.dir / f"sentinel-{i}.conf"
                where = f"port 0\ntls-port {port}\n{tls_conf}" if tls is not None else f"port {port}\n"
                text = (f"{where}bind 127.0.0.1\ndir {self.dir}\nlogfile sentinel-{i}.log\n"
                        f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.node_ports[0]} 2\n"
                        f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
                        f"sentinel failover-timeout {MASTER_NAME} 3000\nsentinel parallel-syncs {MASTER_NAME} 1\n")
                if redis_password:
                    text += f"sentinel auth-pass {MASTER_NAME} {redis_password}\n"
                if sentinel_password:
                    text += f"requirepass {sentinel_password}\nsentinel sentinel-pass {sentinel_password}\n"
                conf.write_text(text)
                self._spawn(port, [exe, str(conf), "--sentinel"])

            def ready() -> bool:
                for port in self.sentinel_ports:
                    info = self._sentinel(port).execute_command("SENTINEL", "MASTER", MASTER_NAME)
                    fields = dict(zip(info[::2], info[1::2])) if isinstance(info, list) else info
                    if str(fields.get("num-other-sentinels")) != "2" or str(fields.get("num-slaves")) != "1":
                        return False
                return self._info(1).get("master_link_status") == "up"

            if not wait_until(ready):
                raise RuntimeError(f"the sentinels did not find each other and the replica; see {self.dir}")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, port: int, args: List[str]) -> None:
        self.procs[port] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, cwd=self.dir)
        if not wait_until(lambda: self._pings(port), 30.0):
            raise RuntimeError(f"redis-server on port {port} did not come up; see {self.dir}")

    def _pings(self, port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if self.tls is not None:
                    return True  # TLS only: listening is up enough
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
        except OSError:
            return False

    def _ssl(self) -> Dict[str, object]:
        return {} if self.tls is None else {"ssl": True, "ssl_ca_certs": str(self.tls[2])}

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, password=self.sentinel_password, decode_responses=True,
                           socket_timeout=2, socket_connect_timeout=2, **self._ssl())  # type: ignore[arg-type]

    def node(self, i: int) -> redis.Redis:
        """A plain client of node ``i`` (0: the first master)."""
        return redis.Redis(host="127.0.0.1", port=self.node_ports[i], password=self.redis_password,
                           socket_timeout=5, socket_connect_timeout=2, **self._ssl())  # type: ignore[arg-type]

    def _info(self, i: int) -> Dict[str, object]:
        with self.node(i) as r:
            info: Dict[str, object] = r.info("replication")
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in info.items()}

    @property
    def nodes(self) -> str:
        """``127.0.0.1:p1,...``, as ``[redis] nodes`` takes it."""
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    def redis_section(self) -> str:
        """The ``[redis]`` section of a delayer.conf for this deployment."""
        text = f"[redis]\nmode = sentinel\nnodes = {self.nodes}\nmaster_name = {MASTER_NAME}\n"
        if self.redis_password:
            text += f"password = {self.redis_password}\n"
        if self.sentinel_password:
            text += f"sentinel_password = {self.sentinel_password}\n"
        if self.tls is not None:
            text += f"tls = yes\ntls_ca_file = {self.tls[2]}\n"
        return text

    def master_port(self) -> Optional[int]:
        """The master's port as a sentinel that answers names it."""
        for port in self.sentinel_ports:
            try:
                addr = self._sentinel(port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
            except redis.RedisError:
                continue
            if addr:
                return int(addr[1])
        return None

    def master(self) -> redis.Redis:
        """A plain client of the master of the moment."""
        port = self.master_port()
        return self.node(self.node_ports.index(port) if port in self.node_ports else 0)

    def kill_master(self) -> int:
        """SIGKILL the master; wait until the replica has taken over and
        accepts writes. Returns the new master's port."""
        old = self.master_port()
        if old is None:
            raise RuntimeError("no sentinel answers")
        proc = self.procs[old]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        new = [p for p in self.node_ports if p != old][0]
        i = self.node_ports.index(new)
        if not wait_until(lambda: self.master_port() == new and self._info(i).get("role") == "master"):
            raise RuntimeError(f"no failover to port {new}; see {self.dir}")
        return new

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> int:
    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    redis_password = os.environ.get("SENTINEL_REDIS_PASSWORD") or None
    # SENTINEL_TLS=cert,key,ca: TLS only, everywhere.
    files = [Path(f) for f in os.environ.get("SENTINEL_TLS", "").split(",") if f]
    tls = (files[0], files[1], files[2]) if len(files) == 3 else None
    deployment = Sentinels(workdir, redis_password=redis_password, tls=tls)
    try:
        print(json.dumps({"nodes": deployment.nodes, "master_name": MASTER_NAME,
                          "ports": deployment.node_ports, "master": deployment.master_port()}), flush=True)
        for line in sys.stdin:
            if line.strip() == "kill-master":
                print(json.dumps({"master": deployment.kill_master()}), flush=True)
            elif line.strip() == "stop":
                break
    finally:
        deployment.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
