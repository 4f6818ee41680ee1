"""Throughput of the Python SDK's Worker (issue 14), runnable alone.

usage: python bench/worker_bench.py [--url REDIS_URL] [--jobs 100000]
                                    [--concurrency 100] [--asyncio] [--commands]

Pushes JOBS jobs due at once (push_many) to topic "bench", makes them ready
with the server's move.lua (not timed), then times a Worker draining them at
least once (reserve, no-op handler, ack) at CONCURRENCY. Without --url it
starts a redis-server of its own on a free loopback port (--save "" and no
AOF, as bench/run.sh's). Prints one JSON line: jobs, seconds, jobs_per_s,
first_job_ms (from the start of run() to the first handler call), and Redis's
own time in reserve.lua per job (commandstats), which bounds the rate.
--commands adds "commands": Redis's time per job in each command the run
made, the scripts' inner commands included (commandstats counts them apart;
a script's own figure includes its inner commands' time).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import redis

import delayer.aio
from delayer import Delayer, Delivery, Job, Worker

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "bench"
BODY = b'{"order":1234567,"act":"close"}'


def own_redis() -> "tuple[subprocess.Popen[bytes], str, str]":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="delayer-worker-bench-")
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return proc, url, folder
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def fill(url: str, jobs: int) -> None:
    """JOBS ready jobs of TOPIC, nothing else in the database."""
    raw = redis.Redis.from_url(url)
    raw.flushdb()
    with Delayer(url) as d:
        for start in range(0, jobs, 10_000):
            d.push_many(Job(TOPIC, f"job-{i}", 0, BODY) for i in range(start, min(jobs, start + 10_000)))
    move = raw.register_script((ROOT / "lua" / "move.lua").read_bytes())
    moved = 0
    while moved < jobs:
        # move.lua's header: KEYS pool, malformed, scheduled_count, topics; ARGV bucket prefix, ready prefix, batch
        keys = ["delayer:job_pool", "delayer:malformed", "delayer:scheduled_count", "delayer:topics"]
        moved += int(move(keys=keys, args=["delayer:job_bucket:", "delayer:ready_queue:", 1000])[0])
    raw.config_resetstat()
    raw.close()


def script_usec(url: str) -> float:
    raw = redis.Redis.from_url(url)
    stats: Dict[str, Any] = raw.info("commandstats")
    raw.close()
    return float(sum(v["usec"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval")))


def command_usec(url: str, jobs: int) -> Dict[str, Any]:
    """Per command: calls and microseconds of Redis per job, dearest first."""
    raw = redis.Redis.from_url(url)
    stats: Dict[str, Any] = raw.info("commandstats")
    raw.close()
    rows = sorted(stats.items(), key=lambda kv: -kv[1]["usec"])
    return {k.removeprefix("cmdstat_"): {"calls_per_job": round(v["calls"] / jobs, 3),
                                         "usec_per_job": round(v["usec"] / jobs, 2)} for k, v in rows}


def run_threads(url: str, jobs: int, concurrency: int) -> "tuple[float, float]":
    d = Delayer(url)
    worker = Worker(d, concurrency=concurrency, ttr=60)
    done = itertools.count(1)  # next() is atomic: no lock between handler threads
    first: List[float] = []

    def handle(job: Delivery) -> None:
        if not first:
            first.append(time.perf_counter())
        if next(done) >= jobs:
            worker.stop()  # the last acks go out as the worker stops

    worker.handle(TOPIC, handle)
    start = time.perf_counter()
    worker.run(signals=False)
    seconds = time.perf_counter() - start
    d.close()
    return seconds, (first[0] - start) * 1000 if first else -1.0


async def run_tasks(url: str, jobs: int, concurrency: int) -> "tuple[float, float]":
    async with delayer.aio.Delayer(url) as d:
        worker = delayer.aio.Worker(d, concurrency=concurrency, ttr=60)
        done = [0]
        first: List[float] = []

        async def handle(job: delayer.aio.Delivery) -> None:
            if not first:
                first.append(time.perf_counter())
            done[0] += 1
            if done[0] >= jobs:
                worker.stop()

        worker.handle(TOPIC, handle)
        start = time.perf_counter()
        await worker.run(signals=False)
        seconds = time.perf_counter() - start
        return seconds, (first[0] - start) * 1000 if first else -1.0


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url")
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--concurrency", type=int, default=100)
    p.add_argument("--asyncio", action="store_true", help="the asyncio Worker instead of the thread Worker")
    p.add_argument("--commands", action="store_true", help="also Redis's time per job in each command")
    args = p.parse_args(argv)
    proc = folder = None
    url = args.url
    if url is None:
        proc, url, folder = own_redis()
    try:
        fill(url, args.jobs)
        if args.asyncio:
            seconds, first_ms = asyncio.run(run_tasks(url, args.jobs, args.concurrency))
        else:
            seconds, first_ms = run_threads(url, args.jobs, args.concurrency)
        raw = redis.Redis.from_url(url)
        left = raw.zcard("delayer:reserved") + raw.llen(f"delayer:ready_queue:{TOPIC}")
        raw.close()
        if left:
            sys.exit(f"worker_bench: {left} jobs were not acked")
        out = {
            "worker": "asyncio" if args.asyncio else "threads",
            "jobs": args.jobs,
            "concurrency": args.concurrency,
            "seconds": round(seconds, 3),
            "jobs_per_s": round(args.jobs / seconds),
            "first_job_ms": round(first_ms, 1),
            "redis_script_usec_per_job": round(script_usec(url) / args.jobs, 1),
        }
        if args.commands:
            out["commands"] = command_usec(url, args.jobs)
        print(json.dumps(out))
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
            shutil.rmtree(folder or "", ignore_errors=True)


if __name__ == "__main__":
    main()
