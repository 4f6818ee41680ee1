"""The Redis Cluster harness itself (testkit/cluster.py): six real redis-server
processes form a cluster, keys land on all three masters, a master killed
with SIGKILL is replaced by its replica with the data written before, and
nothing is left running afterwards, also when used as a program (the PHP
tests' way) or left to interpreter exit."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "testkit"))
import cluster as kit  # noqa: E402

DEADLINE = 120.0


def gone(pid: int) -> bool:
    """No process with this pid any more (ours are reaped, so no zombie either)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def answers(port: int) -> bool:
    """Something listens on the port (a raw connect: redis-py would retry)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def keys_on_every_master(c: kit.Cluster) -> Dict[str, int]:
    """Keys and their masters, until all three masters have at least two."""
    found: Dict[str, int] = {}
    masters = c.masters()
    i = 0
    while any(list(found.values()).count(m) < 2 for m in masters):
        key = f"harness:{i}"
        found[key] = c.master_for(key)
        i += 1
    return found


def test_cluster_forms_keeps_data_through_a_master_kill_and_stops_clean() -> None:
    c = kit.Cluster()
    try:
        assert len(c.ports) == 6 and len(set(c.ports)) == 6
        assert all(6379 not in (p, p + 10000) for p in c.ports)
        view = c.topology()
        masters = c.masters()
        assert len(masters) == 3
        assert sorted(n.port for n in view) == sorted(c.ports)
        covered = sorted(r for n in view if n.port in masters for r in n.slots)
        assert covered[0][0] == 0 and covered[-1][1] == kit.SLOTS - 1
        assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:]))
        replicas = {m: c.replica_of(m) for m in masters}
        assert all(r is not None and r not in masters for r in replicas.values())

        keys = keys_on_every_master(c)
        assert set(keys.values()) == set(masters)
        rc: RedisCluster = c.client()
        for key in keys:
            assert rc.set(key, f"value of {key}")
        for key, master in keys.items():
            # the key lives on the master master_for names, and only there
            with c.node(master) as r:
                assert r.get(key) == f"value of {key}"
                assert r.execute_command("WAIT", 1, 10000) == 1
            with c.node(replicas[master] or 0) as r, pytest.raises(redis.ResponseError, match=f"127.0.0.1:{master}"):
                # MOVED to the master (redis-py versions word the error differently)
                r.get(key)
        rc.close()

        victim = next(iter(keys))
        old_pid = c.pids[keys[victim]]
        killed, new = c.kill_master(victim)
        assert killed == keys[victim] and new == replicas[killed]
        assert not c.alive(killed) and gone(old_pid) and not answers(killed)
        assert c.master_for(victim) == new
        assert sorted(c.masters()) == sorted([m for m in masters if m != killed] + [new])
        with c.node(new) as r:
            assert r.get(victim) == f"value of {victim}"
            assert r.info("replication")["role"] == "master"
        after: RedisCluster = c.client()
        for key in keys:
            assert after.get(key) == f"value of {key}"
        assert after.set(victim, "written after the failover")
        assert after.get(victim) == "written after the failover"
        after.close()
        with pytest.raises(RuntimeError, match=f"master {new} has no live replica"):
            c.kill_master(victim)
    finally:
        pids = list(c.pids.values())
        c.stop()
        c.stop()  # idempotent
    assert all(gone(pid) for pid in pids)
    assert not any(answers(p) for p in c.ports)
    assert not c.dir.exists()


def read_line(proc: "subprocess.Popen[str]", deadline: float = DEADLINE) -> Dict[str, object]:
    """The next JSON line of the program, or a failure naming what it said."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(deadline):
            pytest.fail(f"cluster.py said nothing in {deadline:.0f} s")
    finally:
        sel.close()
    line = proc.stdout.readline()
    assert line, f"cluster.py ended (exit {proc.wait(10)})"
    answer: Dict[str, object] = json.loads(line)
    return answer


def test_program_mode_with_a_password(tmp_path: Path) -> None:
    env = dict(os.environ, CLUSTER_REDIS_PASSWORD="cluster pw")
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "testkit" / "cluster.py"), str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdin is not None
    try:
        started = read_line(proc)
        ports = started["ports"]
        assert isinstance(ports, list) and len(ports) == 6
        assert started["nodes"] == ",".join(f"127.0.0.1:{p}" for p in ports)
        masters = started["masters"]
        assert isinstance(masters, list) and len(masters) == 3
        with redis.Redis(host="127.0.0.1", port=ports[0], socket_timeout=5) as r:
            with pytest.raises(redis.AuthenticationError):
                r.ping()
        seeds = [ClusterNode("127.0.0.1", int(p)) for p in ports]  # type: ignore[call-overload]
        rc = RedisCluster(startup_nodes=seeds, password="cluster pw", decode_responses=True)
        assert rc.set("program key", "kept")
        master = next(p for p in masters if owns(int(p), "program key"))  # type: ignore[call-overload]
        with redis.Redis(port=int(master), password="cluster pw", socket_timeout=15) as r:
            assert r.execute_command("WAIT", 1, 10000) == 1
        rc.close()

        proc.stdin.write("bogus\n")
        proc.stdin.flush()
        assert "unknown command" in str(read_line(proc)["error"])

        proc.stdin.write("kill-master program key\n")
        proc.stdin.flush()
        moved = read_line(proc)
        assert moved["killed"] == master
        assert moved["master"] in ports and moved["master"] not in masters
        assert not answers(int(master))  # type: ignore[call-overload]
        after = RedisCluster(startup_nodes=[n for n in seeds if n.port != master],
                             password="cluster pw", decode_responses=True)
        assert after.get("program key") == "kept"
        after.close()

        proc.stdin.write("stop\n")
        proc.stdin.flush()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.terminate()  # its SIGTERM handler stops the nodes
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert not any(answers(int(p)) for p in ports)  # type: ignore[call-overload]
    assert list(tmp_path.iterdir()) == []


def owns(port: int, key: str) -> bool:
    """Whether the node on ``port`` serves ``key`` (GET answers, no MOVED)."""
    try:
        with redis.Redis(port=port, password="cluster pw", socket_timeout=5) as r:
            r.get(key)
        return True
    except redis.ResponseError:
        return False


def test_nodes_do_not_outlive_the_interpreter(tmp_path: Path) -> None:
    # A test that forgets stop(): the atexit hook still kills every node.
    script = ("import json, sys; sys.path.insert(0, sys.argv[1]); import cluster; "
              "c = cluster.Cluster(); print(json.dumps([c.ports, list(c.pids.values()), str(c.dir)]))")
    done = subprocess.run([sys.executable, "-c", script, str(REPO_ROOT / "testkit")], stdout=subprocess.PIPE,
                          text=True, timeout=DEADLINE, check=True)
    ports: List[int]
    pids: List[int]
    ports, pids, where = json.loads(done.stdout)
    assert len(pids) == 6
    end = time.monotonic() + 30
    while not all(gone(pid) for pid in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert all(gone(pid) for pid in pids)
    assert not any(answers(p) for p in ports)
    assert not Path(where).exists()
