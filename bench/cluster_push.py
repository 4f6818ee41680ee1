"""push_many of the Python SDK on a local Redis Cluster beside one Redis
(issue 12: "push_many per SDK in cluster mode").

usage: .venv/bin/python bench/cluster_push.py [--jobs N] [--topics N] [--rounds N]

Starts one redis-server (sdk-python's test harness) and a 6-node cluster of
3 masters (testkit/cluster.py), both on loopback, persistence off. Each
round pushes --jobs jobs (id = a number, empty body, due now) over --topics
topics in the per-topic layout (``layout="topic"``; ``Delayer(cluster=...)``
for the cluster, redis-py's RedisCluster underneath), sorted by topic and
sent by push_many 1000 at a time as a producer of one kind of job would,
against one Redis and against the cluster, in alternating order, each after
a FLUSHALL. It checks every job landed in its topic's pool and prints jobs/s
of both and the ratio cluster / one Redis, per round. The cluster's nodes
share the machine's cores with everything else: it measures the cluster's
overhead (routing, one connection per node), not added capacity.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "testkit"))
sys.path.insert(0, str(ROOT / "sdk-python" / "tests"))

import cluster as kit  # noqa: E402
from conftest import RedisServer  # noqa: E402

from delayer import Delayer, Job  # noqa: E402
from delayer.keys import TOPIC, Keys  # noqa: E402

CHUNK = 1000


def positive(text: str) -> int:
    n = int(text.replace("_", ""))
    if n <= 0:
        raise argparse.ArgumentTypeError("needs a positive number")
    return n


def push_rate(d: Delayer, jobs: List[Job]) -> float:
    started = time.perf_counter()
    for k in range(0, len(jobs), CHUNK):
        d.push_many(jobs[k:k + CHUNK])
    return len(jobs) / (time.perf_counter() - started)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=positive, default=100_000)
    p.add_argument("--topics", type=positive, default=30)
    p.add_argument("--rounds", type=positive, default=2)
    a = p.parse_args()

    topics = [f"t{t}" for t in range(a.topics)]
    jobs = sorted((Job(topics[i % a.topics], str(i), 0) for i in range(a.jobs)), key=lambda j: j.topic)
    pools = [Keys("delayer:", TOPIC).names(t).pool for t in topics]
    print(f"Python push_many: {a.jobs} jobs over {a.topics} topics, per-topic layout, {CHUNK} jobs per call; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)

    single = RedisServer()
    cluster = kit.Cluster()
    try:
        one = Delayer(single.url, layout="topic")
        many = Delayer(cluster=cluster.seeds)
        raw_one = single.client()
        raw_many = cluster.client()

        def flush_one() -> None:
            raw_one.flushall()

        def flush_many() -> None:
            for port in cluster.masters():
                with cluster.node(port) as r:
                    r.flushall()

        def count(r: Any) -> int:
            return sum(int(r.zcard(k)) for k in pools)

        def measure(d: Delayer, flush: Callable[[], None], r: Any) -> float:
            flush()
            d.push_many([Job(t, "warm", 3600) for t in topics])  # connections and scripts, not timed
            flush()
            rate = push_rate(d, jobs)
            got = count(r)
            if got != a.jobs:
                raise SystemExit(f"cluster_push: {got} jobs in the pools, not {a.jobs}")
            return rate

        for n in range(1, a.rounds + 1):
            if n % 2:
                r1 = measure(one, flush_one, raw_one)
                rc = measure(many, flush_many, raw_many)
            else:
                rc = measure(many, flush_many, raw_many)
                r1 = measure(one, flush_one, raw_one)
            print(f"round {n}: one Redis {r1:9.0f} jobs/s, 3-master cluster {rc:9.0f} jobs/s, "
                  f"cluster / one Redis {rc / r1:.2f}", flush=True)
        one.close()
        many.close()
    finally:
        cluster.stop()
        single.stop()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
