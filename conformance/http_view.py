"""The HTTP API's view of one job, for test_conformance_inspect.py:
``GET /v1/topics/{topic}/jobs/{id}`` on a real ``delayer`` server.

That test keeps each step of a job's life still (no server moves its jobs),
but the HTTP API is served by the server, whose timer moves due jobs. So the
server here reads a replica of the test's Redis: it answers lookups with
what the master holds (``WAIT`` first, so the replica has every write), and
its moves fail on the read-only replica, leaving every job where the test put
it. Started on first use, stopped when the tests end.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

import redis

import harness


class HttpView:
    """A read-only replica of ``master_port`` and a server with ``http_addr`` on it,
    in key ``layout`` (classic or topic)."""

    def __init__(self, master_port: int, prefix: str, layout: str = "classic") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="delayer-http-view-"))
        self.procs: List[subprocess.Popen] = []
        self.replica_port = harness.free_port()
        exe = shutil.which("redis-server")
        assert exe is not None, "redis-server is not installed"
        self._start([exe, "--port", str(self.replica_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--dir", str(self.dir), "--logfile", "replica.log", "--replicaof", "127.0.0.1", str(master_port)])
        replica = redis.Redis(port=self.replica_port, socket_timeout=2, socket_connect_timeout=2)

        def synced() -> bool:
            try:
                return bool(replica.info("replication").get("master_link_status") == "up")
            except redis.RedisError:
                return False

        assert harness.wait_until(synced, step=0.05), f"the replica did not sync: {harness.tail(self.dir / 'replica.log')}"
        replica.close()
        self.port = harness.free_port()
        conf = self.dir / "delayer.conf"
        conf.write_text(f"[delayer]\ntimer_interval = 3600000\nkey_prefix = {prefix}\nlayout = {layout}\n"
                        "log_level = warn\n"
                        f"http_addr = 127.0.0.1:{self.port}\n\n[redis]\nhost = 127.0.0.1\nport = {self.replica_port}\n")
        exe_server = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
        self.log = self.dir / "server.log"
        self._start([str(exe_server), "-c", str(conf)], log=self.log)
        assert harness.wait_until(self._healthy, step=0.05), f"the HTTP API did not answer: {harness.tail(self.log)}"
        atexit.register(self.stop)

    def _start(self, argv: List[str], log: Optional[Path] = None) -> None:
        out = open(log, "wb") if log else subprocess.DEVNULL
        self.procs.append(subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=subprocess.STDOUT, preexec_fn=harness._die_with_parent))

    def _get(self, path: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=harness.DEADLINE) as resp:
            return json.loads(resp.read())

    def _healthy(self) -> bool:
        if any(p.poll() is not None for p in self.procs):
            raise RuntimeError(f"the replica or the server exited: {harness.tail(self.log)}")
        try:
            return bool(self._get("/v1/health")["status"] == "ok")
        except OSError:
            return False

    def catch_up(self, master: "redis.Redis") -> None:
        """Returns once the replica has every write made so far.

        WAIT counts only this connection's own writes (the drivers wrote on
        theirs), so it first writes something itself: the replication stream
        is one ordered log, and a replica that has this write has every write
        made before it, whoever made it."""
        master.incr("__http_view_catch_up__")
        assert master.execute_command("WAIT", 1, 10_000) == 1, "the replica did not acknowledge the writes"

    def job(self, master: "redis.Redis", topic: str, job_id: str) -> Dict[str, Any]:
        """The job as the API shows it, once the replica has every write."""
        self.catch_up(master)
        q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
        view: Dict[str, Any] = self._get(f"/v1/topics/{q(topic)}/jobs/{q(job_id)}")
        return view

    def stop(self) -> None:
        for p in reversed(self.procs):
            harness.stop_process(p)
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


_view: Optional[HttpView] = None


def shared_view(master_port: int, prefix: str, layout: str = "classic") -> HttpView:
    """The one replica and server of this run (the dashboard view uses it too), started on first use."""
    global _view
    if _view is None:
        _view = HttpView(master_port, prefix, layout)
    return _view


def http_view(master: "redis.Redis", master_port: int, prefix: str, topic: str, job_id: str,
              layout: str = "classic") -> Dict[str, Any]:
    """The HTTP API's JSON of ``job_id``; starts the replica and server once."""
    return shared_view(master_port, prefix, layout).job(master, topic, job_id)
