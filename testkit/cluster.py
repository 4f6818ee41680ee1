"""A local Redis Cluster for cluster tests (the Python twin of
testkit/src/cluster.rs): six ``redis-server`` processes on free loopback ports
(never 6379), three masters with one replica each, joined by
``redis-cli --cluster create`` and stopped by :meth:`Cluster.stop` (also at
interpreter exit).

Each node's cluster bus listens on its port + 10000, so a port is only taken
when both are free. Nodes call a peer down after 2 s
(``cluster-node-timeout``) and a replica may always take over
(``cluster-replica-validity-factor 0``), so after :meth:`Cluster.kill_master`
the replica is promoted within seconds. Persistence is off.

Used by sdk-python's tests (import it after putting this directory on
``sys.path``), and by PHP's tests as a program::

    python3 testkit/cluster.py <dir>

starts the cluster (env ``CLUSTER_REDIS_PASSWORD``: every node's password),
prints one JSON line (``nodes``: ``host:port,...`` as ``[redis] nodes`` takes
it, ``ports``, ``masters``) and then obeys lines on stdin: ``kill-master
[key]`` (the key is the rest of the line; answers ``{"killed": <port>,
"master": <port>}`` once the replica has taken over, or ``{"error": ...}``)
and ``stop``. SIGTERM or the end of stdin stops it too.
"""

from __future__ import annotations

import atexit
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
from typing import Callable, Dict, List, NamedTuple, Optional, Set, Tuple, TypeVar
from urllib.parse import quote

import redis

#: How long forming the cluster, or a failover, may take on a slow, loaded machine.
DEADLINE = 90.0
#: ``cluster-node-timeout``: how long a silent node has until its peers call it down.
NODE_TIMEOUT_MS = 2000
#: The cluster bus listens on the node's port plus this.
BUS_OFFSET = 10000
SLOTS = 16384

_given: Set[int] = set()
T = TypeVar("T")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A loopback port P, not handed out before by this process, such that P
    and its bus port P + 10000 are both free (and neither is 6379/16379)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        bus = port + BUS_OFFSET
        if bus > 65535 or port in (6379, 16379) or port in _given or bus in _given or not _free(bus):
            continue
        _given.update((port, bus))
        return port


def _wait_until(check: Callable[[], bool], deadline: float = DEADLINE) -> bool:
    end = time.monotonic() + deadline
    while True:
        try:
            if check():
                return True
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


class Node(NamedTuple):
    """One line of ``CLUSTER NODES``."""

    id: str
    port: int
    flags: Set[str]
    master_id: str  # "-" for a master
    slots: List[Tuple[int, int]]  # owned ranges, inclusive

    @property
    def failing(self) -> bool:
        return bool(self.flags & {"fail", "fail?", "handshake", "noaddr"})

    def owns(self, slot: int) -> bool:
        return any(lo <= slot <= hi for lo, hi in self.slots)


def parse_nodes(text: str) -> List[Node]:
    """``CLUSTER NODES`` as a list (slots being imported or migrated, in
    brackets, are not owned and left out)."""
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        addr = fields[1].split("@")[0]
        slots = []
        for part in fields[8:]:
            if part.startswith("["):
                continue
            lo, _, hi = part.partition("-")
            slots.append((int(lo), int(hi or lo)))
        nodes.append(Node(fields[0], int(addr.rsplit(":", 1)[1]), set(fields[2].split(",")), fields[3], slots))
    return nodes


class Cluster:
    """Three masters and three replicas, on loopback, persistence off."""

    def __init__(self, workdir: Optional[Path] = None, password: Optional[str] = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="delayer-cluster-", dir=workdir))
        self.password = password
        self.procs: Dict[int, "subprocess.Popen[bytes]"] = {}
        self.ports: List[int] = []
        self._stopped = False
        #: Seconds the last start and the last :meth:`kill_master` took (for reports).
        self.start_seconds = 0.0
        self.failover_seconds = 0.0
        self._server = shutil.which("redis-server")
        self._cli = shutil.which("redis-cli")
        if self._server is None or self._cli is None:
            raise RuntimeError("redis-server and redis-cli must be installed")
        atexit.register(self.stop)
        began = time.monotonic()
        try:
            for _ in range(6):
                self.ports.append(self._start_node())
            self._create()
            self._wait_formed()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began

    # -- starting ---------------------------------------------------------

    def _start_node(self) -> int:
        """Starts one node on a fresh port pair; retries on another pair when
        the process dies (someone took a port between the check and the bind)."""
        tail = ""
        for _ in range(5):
            port = cluster_port()
            args = [str(self._server), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                    "--logfile", f"node-{port}.log", "--dbfilename", f"node-{port}.rdb", "--save", "",
                    "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
                    "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-replica-validity-factor", "0",
                    "--repl-diskless-sync-delay", "0"]
            if self.password:
                args += ["--requirepass", self.password, "--masterauth", self.password]
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, cwd=self.dir)
            self.procs[port] = proc
            if _wait_until(lambda: self._pings(port) or proc.poll() is not None, 30.0) and proc.poll() is None:
                return port
            tail = self.log_tail(port)
            proc.kill()
            proc.wait()
            del self.procs[port]
        raise RuntimeError(f"redis-server (cluster node) did not come up; last log lines:\n{tail}")

    def _create(self) -> None:
        env = dict(os.environ)
        if self.password:
            env["REDISCLI_AUTH"] = self.password  # not -a: keeps it out of `ps`
        cmd = [str(self._cli), "--cluster", "create", *self.nodes, "--cluster-replicas", "1", "--cluster-yes"]
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=env, timeout=DEADLINE)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            raise RuntimeError(f"redis-cli --cluster create did not finish in {DEADLINE:.0f} s:\n"
                               f"{self._scrub(out[-3000:])}") from None
        if done.returncode != 0:
            out = done.stdout.decode(errors="replace")
            raise RuntimeError(f"redis-cli --cluster create failed (exit {done.returncode}):\n"
                               f"{self._scrub(out[-3000:])}\n{self._log_tails()}")

    def _wait_formed(self) -> None:
        """Every node: state ok, all slots served, six nodes known and none
        failing; three masters, each with one replica whose link is up."""
        why = ["not asked yet"]

        def formed() -> bool:
            for port in self.ports:
                info = self._cluster_info(port)
                for field, want in (("cluster_state", "ok"), ("cluster_slots_ok", str(SLOTS)),
                                    ("cluster_known_nodes", "6"), ("cluster_size", "3")):
                    if info.get(field) != want:
                        why[0] = f"node {port}: {field} is {info.get(field)}, not {want}"
                        return False
                view = self._view(port)
                masters = [n for n in view if "master" in n.flags and n.slots]
                if len(masters) != 3 or any(n.failing for n in view):
                    why[0] = f"node {port} sees {len(masters)} masters with slots, or a failing node"
                    return False
                for m in masters:
                    if len([n for n in view if n.master_id == m.id]) != 1:
                        why[0] = f"node {port}: master {m.port} does not have one replica"
                        return False
            for port in self.ports:
                role = self._replication(port)
                if role.get("role") == "slave" and role.get("master_link_status") != "up":
                    why[0] = f"replica {port}: link to its master is {role.get('master_link_status')}"
                    return False
                if role.get("role") == "master" and role.get("slave0") != "online":
                    why[0] = f"master {port}: replica not online ({role.get('slave0')})"
                    return False
            return True

        if not _wait_until(formed):
            raise RuntimeError(f"the cluster did not form in {DEADLINE:.0f} s: {why[0]}\n{self._log_tails()}")

    # -- talking to nodes -------------------------------------------------

    def _pings(self, port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
        except OSError:
            return False

    def node(self, port: int) -> redis.Redis:
        """A plain (not cluster-aware) client of one node, answers decoded."""
        return redis.Redis(host="127.0.0.1", port=port, password=self.password, decode_responses=True,
                           socket_timeout=5, socket_connect_timeout=2)

    def _ask(self, port: int, *args: str) -> str:
        # "CLUSTER", "NODES" as two words: redis-py has no reply callback for a bare
        # "CLUSTER", so the text comes back as the server sent it (in every version).
        with self.node(port) as r:
            return str(r.execute_command(*args))

    def _fields(self, text: str) -> Dict[str, str]:
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def _cluster_info(self, port: int) -> Dict[str, str]:
        return self._fields(self._ask(port, "CLUSTER", "INFO"))

    def _replication(self, port: int) -> Dict[str, str]:
        """``INFO replication`` (redis-py parses it; ``slave0`` comes back as a
        dict, and only its ``state`` matters here)."""
        with self.node(port) as r:
            info = r.info("replication")
        return {k: (str(v.get("state")) if isinstance(v, dict) else str(v)) for k, v in info.items()}

    def _view(self, port: int) -> List[Node]:
        return parse_nodes(self._ask(port, "CLUSTER", "NODES"))

    def alive(self, port: int) -> bool:
        proc = self.procs.get(port)
        return proc is not None and proc.poll() is None

    def _live_ports(self) -> List[int]:
        return [p for p in self.ports if self.alive(p)]

    def _first_answer(self, ask: Callable[[int], T]) -> T:
        """``ask`` of the first live node that answers."""
        last: Optional[Exception] = None
        for port in self._live_ports():
            try:
                return ask(port)
            except (redis.RedisError, OSError) as e:
                last = e
        raise RuntimeError(f"no node of the cluster answers ({last})")

    # -- what tests use ---------------------------------------------------

    @property
    def nodes(self) -> List[str]:
        """Every node as ``127.0.0.1:<port>``."""
        return [f"127.0.0.1:{p}" for p in self.ports]

    @property
    def seeds(self) -> str:
        """The live nodes as ``127.0.0.1:p1,...``, as ``[redis] nodes`` takes it."""
        return ",".join(f"127.0.0.1:{p}" for p in self._live_ports())

    @property
    def pids(self) -> Dict[int, int]:
        """port -> pid of every node started (killed ones included)."""
        return {port: proc.pid for port, proc in self.procs.items()}

    def url(self, port: Optional[int] = None) -> str:
        """``redis://[:pw@]127.0.0.1:<port>/`` of a node (the first live one by default)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{port or self._live_ports()[0]}/"

    def redis_section(self) -> str:
        """The ``[redis]`` section of a delayer.conf for this cluster."""
        text = f"[redis]\nmode = cluster\nnodes = {self.seeds}\n"
        if self.password:
            text += f"password = {self.password}\n"
        return text

    def client(self, **kwargs: object) -> "redis.cluster.RedisCluster":
        """A redis-py ``RedisCluster`` seeded with every live node."""
        from redis.cluster import ClusterNode, RedisCluster

        seeds = [ClusterNode("127.0.0.1", p) for p in self._live_ports()]  # type: ignore[no-untyped-call]
        options: Dict[str, object] = {"decode_responses": True, "password": self.password}
        options.update(kwargs)
        return RedisCluster(startup_nodes=seeds, **options)  # type: ignore[arg-type]

    def slot(self, key: str) -> int:
        """The hash slot of ``key`` (``CLUSTER KEYSLOT``)."""
        def ask(port: int) -> int:
            with self.node(port) as r:
                return int(r.execute_command("CLUSTER", "KEYSLOT", key))
        return self._first_answer(ask)

    def topology(self) -> List[Node]:
        """``CLUSTER NODES`` as the first live node that answers sees it."""
        return self._first_answer(self._view)

    def masters(self) -> List[int]:
        """Ports of the masters serving slots, in start order."""
        serving = {n.port for n in self.topology() if "master" in n.flags and n.slots and not n.failing}
        return [p for p in self.ports if p in serving]

    def master_for(self, key: str) -> int:
        """The port of the master that owns ``key``'s slot."""
        slot = self.slot(key)
        for n in self.topology():
            if "master" in n.flags and not n.failing and n.owns(slot):
                return n.port
        raise RuntimeError(f"no live master owns slot {slot}")

    def replica_of(self, master: int) -> Optional[int]:
        """The port of a live replica of the master on ``master``, if any."""
        view = self.topology()
        ids = {n.port: n.id for n in view}
        for n in view:
            if n.master_id == ids.get(master) and self.alive(n.port) and not n.failing:
                return n.port
        return None

    def kill_master(self, key: Optional[str] = None) -> Tuple[int, int]:
        """SIGKILL the master owning ``key``'s slot (the first master when no
        key), then wait until its replica is a master serving those slots in
        every surviving node's view, and every survivor reports
        ``cluster_state:ok``. Returns (killed port, new master port)."""
        old = self.master_for(key) if key is not None else self.masters()[0]
        replica = self.replica_of(old)
        if replica is None:
            raise RuntimeError(f"master {old} has no live replica to take over")
        slot = next(n for n in self.topology() if n.port == old).slots[0][0]
        began = time.monotonic()
        proc = self.procs[old]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        why = ["not asked yet"]

        def took_over() -> bool:
            if self._replication(replica).get("role") != "master":
                why[0] = f"replica {replica} is not a master yet"
                return False
            for port in self._live_ports():
                if self._cluster_info(port).get("cluster_state") != "ok":
                    why[0] = f"node {port}: cluster_state is not ok"
                    return False
                owner = [n.port for n in self._view(port) if not n.failing and n.owns(slot)]
                if owner != [replica]:
                    why[0] = f"node {port}: slot {slot} is served by {owner}, not {replica}"
                    return False
            return True

        if not _wait_until(took_over):
            raise RuntimeError(f"no failover from {old} to {replica} in {DEADLINE:.0f} s: {why[0]}\n"
                               f"{self._log_tails()}")
        self.failover_seconds = time.monotonic() - began
        return old, replica

    def log_tail(self, port: int, lines: int = 15) -> str:
        """The last lines of a node's log (password scrubbed)."""
        try:
            text = (self.dir / f"node-{port}.log").read_text(errors="replace")
        except OSError:
            return f"(no log for node {port})"
        return self._scrub("\n".join(text.splitlines()[-lines:]))

    def _log_tails(self) -> str:
        return "\n".join(f"--- node {p} log ---\n{self.log_tail(p, 8)}" for p in self.ports)

    def _scrub(self, text: str) -> str:
        return text.replace(self.password, "***") if self.password else text

    def stop(self) -> None:
        """Kills every node and removes the directory; safe to call again."""
        if self._stopped:
            return
        self._stopped = True
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else None

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(0)  # runs the finally below: no node outlives us

    signal.signal(signal.SIGTERM, terminate)
    cluster = Cluster(workdir, password=os.environ.get("CLUSTER_REDIS_PASSWORD") or None)
    try:
        print(json.dumps({"nodes": cluster.seeds, "ports": cluster.ports, "masters": cluster.masters()}), flush=True)
        for line in sys.stdin:
            command, _, key = line.strip().partition(" ")  # the key is the rest of the line
            if command == "kill-master":
                try:
                    old, new = cluster.kill_master(key or None)
                    print(json.dumps({"killed": old, "master": new}), flush=True)
                except RuntimeError as e:
                    print(json.dumps({"error": str(e)}), flush=True)
            elif command == "stop" and not key:
                break
            elif command:
                print(json.dumps({"error": f"unknown command {line.strip()!r}: kill-master [key] or stop"}),
                      flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
