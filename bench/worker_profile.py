"""Where the Python Workers spend their CPU (issue 21), by py-spy.

usage: python bench/worker_profile.py [--asyncio] [--jobs 100000] [--rate 250] [--top 25] [--keep FILE]

Runs ``bench/worker_bench.py`` (the same run as bench/run.sh's: push_many,
move.lua, then a Worker at concurrency 100 with a no-op handler) under
``py-spy record --gil`` (only the thread holding the GIL is sampled: the
Worker is bound by one core's Python, so that is where its time goes), on
a redis-server of its own, and sums the samples of the Worker's run (the
fill is left out) per layer, by the innermost frame that belongs to one:

- redis-py parsing: redis/_parsers, and reading replies in redis/connection.py
- redis-py sending: packing commands, the connection pool, client dispatch
- our decode: delayer/_replies.py, models.py, _names.py, _trace.py
- our call layer: delayer/_calls.py, _ops.py, _wire.py, _rules.py, client.py, aio.py, scripts.py
- our Worker bookkeeping: delayer/_worker_core.py, worker.py, aio_worker.py, _worker_hooks.py
- thread handoff: threading.py, queue.py, concurrent/futures
- asyncio scheduling: asyncio/*
- socket I/O: socket.py, selectors.py, ssl.py
- the handler: worker_bench.py's handle
- OpenTelemetry consumer span: delayer._trace.consumer_span and what it calls
  (opentelemetry-api is installed in the repository's venv, no SDK)
- other

py-spy needs ptrace: run as root, or with ``kernel.yama.ptrace_scope = 0``
(``pip install py-spy`` puts it beside this interpreter). Prints the layer
table and the top frames (leaf, own samples) as markdown, and the
worker_bench JSON line (its jobs/s is slowed a little by the sampling).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import List, Optional, Tuple

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from worker_bench import own_redis  # noqa: E402

LAYERS: List[Tuple[str, Tuple[str, ...]]] = [
    ("redis-py parsing", ("redis/_parsers/", "read_response (redis/connection.py", "read_response (redis/asyncio/connection.py",
                          "hiredis")),
    ("redis-py sending", ("redis/",)),
    ("our decode", ("delayer/_replies.py", "delayer/models.py", "delayer/_names.py", "delayer/_trace.py")),
    ("our call layer", ("delayer/_calls.py", "delayer/_ops.py", "delayer/_wire.py", "delayer/_rules.py",
                        "delayer/client.py", "delayer/aio.py", "delayer/scripts.py", "delayer/_eviction.py",
                        "delayer/_base.py", "delayer/keys.py")),
    ("our Worker bookkeeping", ("delayer/_worker_core.py", "delayer/worker.py", "delayer/aio_worker.py",
                                "delayer/_worker_hooks.py")),
    ("thread handoff", ("threading.py", "queue.py", "concurrent/futures")),
    ("asyncio scheduling", ("asyncio/",)),
    ("socket I/O", ("socket.py", "selectors.py", "ssl.py")),
]


def layer(frame: str) -> Optional[str]:
    if "worker_bench.py" in frame:  # the no-op handler; its other frames start the run
        return "the handler" if frame.startswith("handle ") else None
    for name, marks in LAYERS:
        if any(m in frame for m in marks):
            return name
    return None


#: The handler runs inside a consumer span when opentelemetry-api is
#: installed (delayer._trace): its __enter__ / __exit__ are a layer of their own.
SPAN = ("consumer_span (", "opentelemetry/", "trace/__init__.py", "context/contextvars_context.py", "_decorator.py")


def classify(stack: List[str]) -> str:
    """The layer of the innermost frame that has one (stack: outermost first)."""
    if any(any(m in frame for m in SPAN) for frame in stack):
        return "OpenTelemetry consumer span (API only, no SDK)"
    for frame in reversed(stack):
        found = layer(frame)
        if found:
            return found
    return "other"


def cpu_secs(pid: int) -> float:
    """utime + stime of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--asyncio", action="store_true")
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--rate", type=int, default=250, help="samples per second")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--nice", type=int, default=-10 if os.geteuid() == 0 else 0,
                   help="priority of worker_bench and its redis-server (default -10 as root): on a busy "
                        "machine, less of the run is spent waiting for a CPU")
    p.add_argument("--keep", help="also keep py-spy's collapsed stacks in this file")
    p.add_argument("--nonblocking", action="store_true",
                   help="py-spy --nonblocking: does not pause the process per sample (the thread Worker's 100 "
                        "threads make each pause long), stacks a little less exact")
    p.add_argument("--stacks", help="summarise this kept file instead of running anything")
    args = p.parse_args(argv)
    if args.stacks:
        summarise(Path(args.stacks).read_text(), args, None, [])
        return
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    proc, url, folder = own_redis()
    out = Path(tempfile.mkdtemp(prefix="delayer-worker-profile-")) / "stacks.txt"
    try:
        cmd = [sys.executable, str(ROOT / "bench/worker_bench.py"), "--url", url, "--jobs", str(args.jobs)]
        bench_proc = subprocess.Popen(cmd + (["--asyncio"] if args.asyncio else []), stdout=subprocess.PIPE, text=True)
        if args.nice:  # before the Worker's threads start: they inherit it
            for pid in (proc.pid, bench_proc.pid):
                os.setpriority(os.PRIO_PROCESS, pid, args.nice)
        # Attach once the backlog is ready (worker_bench's fill is done), so
        # only the Worker's run is sampled.
        r = redis.Redis.from_url(url)
        # (pool empty, and jobs ready or reserved: the move is over; the
        # Worker may have started already, the moment is short)
        while r.zcard("delayer:job_pool") or not r.llen("delayer:ready_queue:bench") + r.zcard("delayer:reserved"):
            if bench_proc.poll() is not None:
                raise SystemExit("worker_profile: worker_bench ended before its backlog was ready")
            time.sleep(0.01)
        r.close()
        cpu0, wall0 = cpu_secs(bench_proc.pid), time.monotonic()
        spy = subprocess.Popen([pyspy, "record", "--gil", "--format", "raw", "-r", str(args.rate), "-o", str(out),
                                "--pid", str(bench_proc.pid)] + (["--nonblocking"] if args.nonblocking else []), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        cpu1 = cpu0
        while bench_proc.poll() is None:  # its CPU until it exits (the last reading: its end)
            cpu1 = cpu_secs(bench_proc.pid) or cpu1
            time.sleep(0.05)
        wall = time.monotonic() - wall0
        stdout, _ = bench_proc.communicate()
        _, err = spy.communicate()
        if bench_proc.returncode != 0 or not out.exists():
            raise SystemExit(f"worker_profile: worker_bench exited {bench_proc.returncode}; py-spy: {err.strip()[-500:]}")
        bench = [line for line in stdout.splitlines() if line.startswith("{")]
        text = out.read_text()
        if args.keep:
            Path(args.keep).write_text(text)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(out.parent, ignore_errors=True)
    summarise(text, args, (cpu1 - cpu0, wall), bench)


def summarise(text: str, args: argparse.Namespace, cpu: Optional[Tuple[float, float]], bench: List[str]) -> None:
    layers: Counter = Counter()
    leaves: Counter = Counter()
    inclusive: Counter = Counter()
    unread = 0
    total = 0
    for line in text.splitlines():
        stacks, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        count = int(n)
        if not stacks.strip():  # the GIL held, but no Python stack read: left out of the shares
            unread += count
            continue
        stack = stacks.split(";")
        total += count
        layers[classify(stack)] += count
        leaves[stack[-1]] += count
        for f in set(stack):
            inclusive[f] += count
    worker = "asyncio" if args.asyncio else "threads"
    print(f"Python Worker ({worker}), {args.jobs:,} jobs, concurrency 100: {total:,} samples with the GIL held "
          f"({args.rate}/s), and {unread:,} ({100 * unread / max(total + unread, 1):.0f} %) where py-spy found the "
          "GIL held but read no Python stack (left out below; in the thread Worker they grow with machine load: "
          "GIL hand-offs among its threads)\n")
    print("| layer (innermost frame) | share of samples |\n| --- | --- |")
    for name, n in layers.most_common():
        print(f"| {name} | {100 * n / max(total, 1):.1f} % |")
    print(f"\nTop {args.top} frames (own samples):\n\n| frame | share |\n| --- | --- |")
    for frame, n in leaves.most_common(args.top):
        print(f"| `{frame}` | {100 * n / max(total, 1):.1f} % |")
    print(f"\nTop {args.top} frames (inclusive: the frame or its callees):\n\n| frame | share |\n| --- | --- |")
    for frame, n in inclusive.most_common(args.top):
        print(f"| `{frame}` | {100 * n / max(total, 1):.1f} % |")
    if cpu is not None:
        print(f"\nworker_bench's CPU over the Worker's run: {cpu[0]:.2f} s in {cpu[1]:.2f} s "
              f"({100 * cpu[0] / max(cpu[1], 1e-9):.0f} % of one core; the GIL lets Python use at most one)")
    if bench:
        print(f"\nworker_bench under py-spy: {json.dumps(json.loads(bench[-1]))}")


if __name__ == "__main__":
    main()
