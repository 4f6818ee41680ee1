"""Single pushes of the Python SDK in both layouts (issue 12: "what a pushing
client pays" for the per-topic layout).

usage: .venv/bin/python bench/layout_push.py [--pushes N] [--rounds N]

Starts one redis-server (sdk-python's test harness, persistence off). Each
round makes --pushes single ``push`` calls from one thread (id = a number,
empty body, delay 60 s, one topic) with the classic layout and with the
per-topic layout (``layout="topic"``), in alternating order, each after a
FLUSHALL and a few untimed pushes (connection, script cache). It checks that
every job landed in its pool and prints pushes/s of both and the ratio
per-topic / classic, per round. Which SDK it runs is whatever ``import
delayer`` finds: ``PYTHONPATH=<an older sdk-python/src>`` measures that one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk-python" / "tests"))

from conftest import RedisServer  # noqa: E402

import delayer  # noqa: E402
from delayer import Delayer  # noqa: E402


def positive(text: str) -> int:
    n = int(text.replace("_", ""))
    if n <= 0:
        raise argparse.ArgumentTypeError("needs a positive number")
    return n


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pushes", type=positive, default=5000)
    p.add_argument("--rounds", type=positive, default=3)
    a = p.parse_args()
    print(f"Python push: {a.pushes} single pushes from one thread per layout and round; "
          f"delayer from {Path(delayer.__file__).parent}; load average {load()}", flush=True)

    server = RedisServer()
    try:
        raw = server.client()
        clients = {"classic": Delayer(server.url), "topic": Delayer(server.url, layout="topic")}
        pools = {"classic": "delayer:job_pool", "topic": "delayer:{t}:pool"}

        def measure(layout: str) -> float:
            d = clients[layout]
            raw.flushall()
            for i in range(10):  # connection and script cache, not timed
                d.push("t", f"warm{i}", 60)
            raw.flushall()
            started = time.perf_counter()
            for i in range(a.pushes):
                d.push("t", str(i), 60)
            rate = a.pushes / (time.perf_counter() - started)
            got = int(raw.zcard(pools[layout]))
            if got != a.pushes:
                raise SystemExit(f"layout_push: {got} jobs in {pools[layout]}, not {a.pushes}")
            return rate

        for n in range(1, a.rounds + 1):
            order = ["classic", "topic"] if n % 2 else ["topic", "classic"]
            rates = {layout: measure(layout) for layout in order}
            print(f"round {n}: classic {rates['classic']:7.0f} pushes/s, per-topic {rates['topic']:7.0f} pushes/s, "
                  f"per-topic / classic {rates['topic'] / rates['classic']:.2f}", flush=True)
        for d in clients.values():
            d.close()
        raw.close()
    finally:
        server.stop()
    print(f"load average {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
