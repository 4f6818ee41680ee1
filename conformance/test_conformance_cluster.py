"""Every SDK pair in cluster mode, through a failover.

One local Redis Cluster (6 nodes: 3 masters, 3 replicas, with a password:
testkit/cluster.py), the real delayer server and one driver per SDK, all
configured by one delayer.conf with ``[redis] mode = cluster`` and the
per-topic layout. Every pusher/consumer pair (rust, python, php) goes
through the server on a topic of its own (the topics land on every master),
and reserves and acks across SDKs; then the master of one pair's topic is
killed with SIGKILL, and every pair is checked again with the same driver
processes and the same server: nobody was restarted.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

import harness

sys.path.insert(0, str(harness.REPO / "testkit"))
import cluster as kit  # noqa: E402

SDKS = ["rust", "python", "php"]
PAIRS = list(itertools.product(SDKS, SDKS))
PASSWORD = "conformance-cluster-pw"


@pytest.fixture(scope="module")
def failed_over(workdir: Path) -> Iterator[Dict[str, harness.Driver]]:
    """Every pair checked, then a master killed; yields the drivers."""
    (workdir / "cluster-nodes").mkdir(exist_ok=True)
    deployment = kit.Cluster(workdir / "cluster-nodes", password=PASSWORD)
    d = workdir / "cluster-mode"
    d.mkdir(exist_ok=True)
    config = f"[delayer]\ntimer_interval = 100\nlayout = topic\n\n{deployment.redis_section()}"
    try:
        with harness.configured(d, config, SDKS, PASSWORD) as drivers:
            topics = [harness.through_the_server(drivers, p, c, "cluster", "before", kit.DEADLINE) for p, c in PAIRS]
            masters = {deployment.master_for("delayer:{" + t + "}:pool") for t in topics}
            assert len(masters) >= 2, f"the pairs' topics should land on several masters, not only {masters}"
            # At least once across SDKs: each reserves what another pushed and a third acks it.
            for i, (pusher, holder) in enumerate(PAIRS):
                acker = SDKS[(SDKS.index(holder) + 1) % 3]
                topic = f"cluster-reserve-{pusher}-{holder}"
                assert drivers[pusher].request({"op": "push", "topic": topic, "id": str(i), "delay_ms": 0})["ok"]
                got = drivers[holder].request({"op": "breserve", "topic": topic, "ttr_ms": 30_000,
                                               "timeout_ms": 10_000})
                assert got["ok"] and got["job"] is not None, f"{holder} reserved nothing pushed by {pusher}: {got}"
                acked = drivers[acker].request({"op": "ack", "id": str(i), "topic": topic,
                                                "receipt": got["job"]["receipt"]})
                assert acked == {"ok": True, "done": True}, f"{acker} acking {holder}'s reservation: {acked}"
            deployment.kill_master("delayer:{" + topics[0] + "}:pool")
            yield drivers
    finally:
        deployment.stop()


@pytest.mark.parametrize("pusher, consumer", PAIRS)
def test_every_pair_carries_on_after_a_failover(failed_over: Dict[str, harness.Driver], pusher: str,
                                                consumer: str) -> None:
    harness.through_the_server(failed_over, pusher, consumer, "cluster", "after", kit.DEADLINE)


def test_a_rate_limit_holds_for_every_sdk_on_every_master(failed_over: Dict[str, harness.Driver]) -> None:
    """Each SDK limits a topic of its own to one job a day (burst 1) on
    several masters: the server makes one of its three due jobs ready and
    holds the rest; every SDK reads the limit; another SDK's clear lets the
    rest go."""
    for i, controller in enumerate(SDKS):
        topic, other = f"cluster-limit-{controller}", SDKS[(i + 1) % 3]
        set_limit = {"op": "set_rate_limit", "topic": topic, "per_second": 1 / 86400, "burst": 1}
        assert failed_over[controller].request(set_limit)["ok"]
        for n in range(3):
            assert failed_over[other].request({"op": "push", "topic": topic, "id": f"l{i}-{n}", "delay_ms": n})["ok"]
        got = failed_over[controller].request({"op": "bpop", "topic": topic, "timeout_ms": 10_000})
        assert got["ok"] and got["job"] is not None and got["job"]["id"] == f"l{i}-0", f"{topic}: {got}"
        for sdk in SDKS:
            flow = failed_over[sdk].request({"op": "flow", "topic": topic})
            assert (flow["per_second"], flow["burst"]) == (1 / 86400, 1), f"{sdk}: {flow}"
        held = lambda: failed_over[controller].request({"op": "flow", "topic": topic})["held"]  # noqa: E731
        assert harness.wait_until(lambda: held() == 2, kit.DEADLINE), f"{topic}: not held ({held()})"
        assert failed_over[other].request({"op": "pop", "topic": topic}) == {"ok": True, "job": None}
        assert failed_over[other].request({"op": "clear_rate_limit", "topic": topic}) == {"ok": True, "changed": True}
        for n in (1, 2):
            got = failed_over[controller].request({"op": "bpop", "topic": topic, "timeout_ms": 10_000})
            assert got["ok"] and got["job"] is not None and got["job"]["id"] == f"l{i}-{n}", f"{topic}: {got}"


def test_a_pause_holds_for_every_sdk_on_every_master(failed_over: Dict[str, harness.Driver]) -> None:
    """Each SDK pauses a topic of its own (the topics land on several
    masters): no SDK pops its due job while paused, every SDK sees the pause,
    and after another SDK's resume the job is handed out once."""
    for i, controller in enumerate(SDKS):
        topic, other = f"cluster-pause-{controller}", SDKS[(i + 1) % 3]
        assert failed_over[controller].request({"op": "pause", "topic": topic}) == {"ok": True, "changed": True}
        assert failed_over[other].request({"op": "push", "topic": topic, "id": f"p{i}", "delay_ms": 0})["ok"]
        for sdk in SDKS:
            assert failed_over[sdk].request({"op": "is_paused", "topic": topic}) == {"ok": True, "paused": True}
        held = lambda: failed_over[controller].request({"op": "flow", "topic": topic})["held"]  # noqa: E731
        assert harness.wait_until(lambda: held() == 1, kit.DEADLINE), f"{topic}: not held"
        for sdk in SDKS:
            got = failed_over[sdk].request({"op": "pop", "topic": topic})
            assert got == {"ok": True, "job": None}, f"{sdk} popped a job of paused {topic}: {got}"
        assert failed_over[other].request({"op": "resume", "topic": topic}) == {"ok": True, "changed": True}
        got = failed_over[controller].request({"op": "bpop", "topic": topic, "timeout_ms": 10_000})
        assert got["ok"] and got["job"] is not None and got["job"]["id"] == f"p{i}", f"{topic}: {got}"
