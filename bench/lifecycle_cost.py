"""What a job costs Redis over its whole life, beside BullMQ in the same run
(issue 21): Redis's microseconds per job for each step, and Redis memory per
pending job.

    .venv/bin/python bench/lifecycle_cost.py [--rounds 3] [--jobs 20000] [--bulk 100000]
        [--memory-jobs 200000] [--delayer-bin target/release/delayer] [--quick]

Two redis-servers of its own on free loopback ports (no persistence): one for
Delayer, one for BullMQ, so neither's keys, scripts or clients are in the
other's numbers. Delayer is driven by the Python SDK as an application uses
it (the `delayer` package this interpreter imports: PYTHONPATH=sdk-python/src
for a checkout's), in each layout, and the real `delayer` server moves the
jobs; BullMQ by bench/bullmq/lifecycle.js (needs node and `npm ci` there).

Per layout and round, after a FLUSHALL: `push` JOBS jobs one call each (due
now), `push_many` BULK jobs, alternated in 4 slices with the bare write
script (one ZADD + HSET + PEXPIRE per job, 100 jobs a call, 10 calls a round
trip, as push_many sends them; under another prefix, so the server ignores
them); then the server is started and `move` runs until every job is in its
ready list; `pop` takes the JOBS single-pushed jobs one call each,
`reserve+ack` reserves and acks JOBS of the bulk ones one call each, and
`Worker` (the SDK's thread Worker, concurrency 100, no-op handler:
reserve_many carrying the acks) completes the rest. BullMQ: JOBS `queue.add`
and BULK `addBulk` (1000 a call), each with a 1 ms delay (through its delayed
set, as every Delayer job goes through the pool), then one Worker at
concurrency 100 completes them all (removeOnComplete).

Redis time is INFO commandstats, CONFIG RESETSTAT before each step: the time
of the script calls (EVALSHA / EVAL / FCALL, which includes the commands they
run) plus the commands clients sent outside scripts (commandstats counts a
script's commands under their own names too, so these are attributed by a
MONITOR pass over a small copy of the same round before the measured ones;
connection admin, INFO, CONFIG and FLUSHALL are not counted). Beside it,
Redis's CPU (INFO used_cpu_user + used_cpu_sys), which also has reading and
writing the sockets. Memory: used_memory before and after BULK_MEMORY jobs
pending an hour (push_many / addBulk), 32-byte bodies, 10 topics.

Prints per-round lines on stderr and a markdown report on stdout: medians
over the rounds, with the lowest and highest in brackets, and the same-run
ratios. Machine noise moves absolute microseconds a lot; ratios of one round
move much less, and that spread is printed too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import redis

from delayer import Delayer, Job, Worker
from delayer.keys import Keys

sys.path.insert(0, str(Path(__file__).resolve().parent))
import worker_bench  # noqa: E402  (its redis-server)

ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"order":12345678,"act":"close"}'  # 32 bytes, as lifecycle.js's data
assert len(BODY) == 32
SCRIPTS = {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}
# The bench's own and connection bookkeeping, not work on jobs.
NOT_COUNTED = {"info", "config", "client", "hello", "select", "monitor", "echo", "command", "flushall", "auth"}
SENTINEL = "lifecycle-cost-phase-end"
# As root, the redis-servers run at a higher priority: on a busy machine a
# preempted Redis counts the time it waited in commandstats (wall clock).
NICE = -10 if hasattr(os, "geteuid") and os.geteuid() == 0 else 0

# The bare write script: what push_many.lua does at the least (a bucket HASH
# with its TTL, a pool entry), for the same ARGV per job.
BARE_WRITE = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV, 5 do
  local bucket = ARGV[1] .. ARGV[i]
  redis.call('HSET', bucket, 'topic', ARGV[i + 1], 'body', ARGV[i + 2])
  redis.call('PEXPIRE', bucket, tonumber(ARGV[i + 3]) + tonumber(ARGV[i + 4]))
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[i + 3]), ARGV[i])
end
return #ARGV
"""


def own_redis() -> Tuple[subprocess.Popen, redis.Redis, str]:
    """worker_bench's throwaway redis-server (no persistence), at NICE."""
    proc, url, folder = worker_bench.own_redis()
    if NICE:
        os.setpriority(os.PRIO_PROCESS, proc.pid, NICE)
    return proc, redis.Redis.from_url(url), folder


def url_of(r: redis.Redis) -> str:
    return f"redis://127.0.0.1:{r.connection_pool.connection_kwargs['port']}/0"


def commandstats(r: redis.Redis) -> Dict[str, Tuple[int, int]]:
    """{command: (calls, usec)}, subcommands folded into their command."""
    out: Dict[str, Tuple[int, int]] = {}
    for k, v in r.info("commandstats").items():
        name = k.removeprefix("cmdstat_").split("|")[0].lower()
        calls, usec = out.get(name, (0, 0))
        out[name] = (calls + int(v["calls"]), usec + int(v["usec"]))
    return out


def cpu_usec(r: redis.Redis) -> float:
    info = r.info("cpu")
    return (float(info["used_cpu_user"]) + float(info["used_cpu_sys"])) * 1e6


class Monitor:
    """Counts the commands Redis runs, split into sent by a client ("tcp") and
    run by a script ("lua"), until the sentinel ECHO comes by."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.counts: Dict[Tuple[str, str], int] = {}
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self) -> None:
        with self.r.monitor() as m:
            self.ready.set()
            for c in m.listen():
                cmd = str(c.get("command", ""))
                if SENTINEL in cmd:
                    return
                name = cmd.split(" ", 1)[0].strip('"').lower()
                key = ("lua" if c.get("client_type") == "lua" else "tcp", name)
                self.counts[key] = self.counts.get(key, 0) + 1

    def stop(self) -> Dict[Tuple[str, str], int]:
        self.r.echo(SENTINEL)
        self.thread.join(60)
        return self.counts


class Meter:
    """Redis's time and CPU per step. With calibrate=True it records instead,
    per step, the share of each command's calls that clients sent (MONITOR),
    which the measured rounds use to leave out what scripts ran."""

    def __init__(self, r: redis.Redis, calibrate: bool, shares: Dict[str, Dict[str, float]]) -> None:
        self.r, self.calibrate, self.shares = r, calibrate, shares
        self.usec: Dict[str, float] = {}
        self.script_usec: Dict[str, float] = {}
        self.cpu: Dict[str, float] = {}
        self.jobs: Dict[str, int] = {}

    def step(self, name: str, jobs: int, run: Callable[[], None]) -> None:
        """Runs one step (or one slice of it: repeated names add up)."""
        self.r.config_resetstat()
        mon = Monitor(self.r) if self.calibrate else None
        cpu0 = cpu_usec(self.r)
        run()
        cpu = cpu_usec(self.r) - cpu0
        stats = commandstats(self.r)
        if mon is not None:
            counts = mon.stop()
            share = self.shares.setdefault(name, {})
            for (kind, cmd), n in counts.items():
                if kind == "tcp":
                    lua = counts.get(("lua", cmd), 0)
                    share[cmd] = n / (n + lua)
            for (kind, cmd), n in counts.items():
                share.setdefault(cmd, 0.0)  # run by scripts only
        scripts = sum(u for c, (_, u) in stats.items() if c in SCRIPTS)
        share = self.shares.get(name, {})
        other = sum(u * share.get(c, 1.0) for c, (_, u) in stats.items()
                    if c not in SCRIPTS and c not in NOT_COUNTED)
        self.usec[name] = self.usec.get(name, 0.0) + scripts + other
        self.script_usec[name] = self.script_usec.get(name, 0.0) + scripts
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu
        self.jobs[name] = self.jobs.get(name, 0) + jobs

    def per_job(self) -> Dict[str, Tuple[float, float, float]]:
        """{step: (usec/job, script usec/job, cpu usec/job)}"""
        return {k: (self.usec[k] / n, self.script_usec[k] / n, self.cpu[k] / n)
                for k, n in self.jobs.items() if n}


def delayer_server(bin_path: str, port: int, layout: str) -> Tuple[subprocess.Popen, str]:
    folder = tempfile.mkdtemp(prefix="delayer-lifecycle-server-")
    conf = Path(folder) / "delayer.conf"
    extra = "layout = topic\n" if layout == "topic" else ""
    conf.write_text(f"[delayer]\ntimer_interval = 1000\n{extra}\n[redis]\nhost = 127.0.0.1\nport = {port}\n"
                    "database = 0\npassword =\n")
    log = open(Path(folder) / "server.log", "wb")
    proc = subprocess.Popen([str(Path(bin_path).resolve()), "-c", str(conf)], cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, folder


def wait_until(what: str, check: Callable[[], bool], secs: float = 300) -> None:
    deadline = time.monotonic() + secs
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"lifecycle_cost: timed out waiting for {what}")
        time.sleep(0.05)


def delayer_round(r: redis.Redis, meter: Meter, layout: str, n: int, bulk: int, bin_path: str) -> None:
    """One layout's steps; see the module doc."""
    r.flushall()
    keys = Keys("delayer:", layout)
    a, b = keys.names("lc_a"), keys.names("lc_b")
    port = r.connection_pool.connection_kwargs["port"]
    d = Delayer(url_of(r), layout=layout)
    d.push("warm", "warm", 3600)  # connect and load push.lua outside the steps
    d.push_many([Job("warm", "warm2", 3600, BODY)])
    d.remove("warm", topic="warm")
    d.remove("warm2", topic="warm")
    meter.step("push", n, lambda: [d.push("lc_a", f"a-{i}", 0, BODY) for i in range(n)])
    bare = r.register_script(BARE_WRITE)
    bare_keys = Keys("bare:", layout).names("lc_b")
    bare_keys_pool = bare_keys.pool

    def bare_write(lo: int, hi: int) -> None:
        pipe = r.pipeline(transaction=False)
        for start in range(lo, hi, 100):
            args: List[object] = [bare_keys.bucket_prefix]
            for i in range(start, min(hi, start + 100)):
                args += [f"b-{i}", "lc_b", BODY, 0, 300_000]
            bare(keys=[bare_keys_pool], args=args, client=pipe)
            if len(pipe) == 10:
                pipe.execute()
        pipe.execute()

    bare(keys=[bare_keys_pool], args=[bare_keys.bucket_prefix], client=r)  # loaded before the steps
    slices = [(k * bulk // 4, (k + 1) * bulk // 4) for k in range(4)]
    for k, (lo, hi) in enumerate(slices):
        sdk = lambda lo=lo, hi=hi: d.push_many(Job("lc_b", f"b-{i}", 0, BODY) for i in range(lo, hi))
        order = [("push_many", sdk), ("bare write", lambda lo=lo, hi=hi: bare_write(lo, hi))]
        for name, run in order if k % 2 == 0 else order[::-1]:
            meter.step(name, hi - lo, run)

    def move() -> None:
        proc, folder = delayer_server(bin_path, port, layout)
        try:
            wait_until("the server's move", lambda: proc.poll() is None and r.llen(a.ready) + r.llen(b.ready) >= n + bulk)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.returncode not in (0, -signal.SIGTERM):
                sys.stderr.write((Path(folder) / "server.log").read_text(errors="replace")[-2000:])
            shutil.rmtree(folder, ignore_errors=True)

    meter.step("move", n + bulk, move)

    def pop() -> None:
        for _ in range(n):
            if d.pop("lc_a") is None:
                raise SystemExit("lifecycle_cost: pop found no job")

    meter.step("pop", n, pop)

    def reserve_ack() -> None:
        for _ in range(n):
            job = d.reserve("lc_b", 60)
            if job is None or not d.ack(job):
                raise SystemExit("lifecycle_cost: reserve or ack failed")

    meter.step("reserve+ack", n, reserve_ack)
    rest = bulk - n
    worker = Worker(d, concurrency=100, ttr=60)
    done = [0]
    lock = threading.Lock()

    def handle(job: object) -> None:
        with lock:
            done[0] += 1
            if done[0] >= rest:
                worker.stop()

    worker.handle("lc_b", handle)
    meter.step("Worker", rest, lambda: worker.run(signals=False))
    left = r.llen(b.ready) + r.zcard(b.reserved) + r.llen(a.ready)
    if left:
        raise SystemExit(f"lifecycle_cost: {left} jobs left after the Worker")
    d.close()


def node(url: str, phase: str, n: int) -> None:
    out = subprocess.run(["node", str(ROOT / "bench/bullmq/lifecycle.js"), url, phase, str(n)],
                         cwd=ROOT / "bench/bullmq", capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"lifecycle_cost: lifecycle.js {phase} failed: {out.stderr.strip()[-500:]}")


def bullmq_round(r: redis.Redis, meter: Meter, n: int, bulk: int) -> None:
    r.flushall()
    url = url_of(r)
    node(url, "add", 1)  # BullMQ's scripts loaded before the steps
    node(url, "work", 1)
    meter.step("push", n, lambda: node(url, "add", n))
    meter.step("push_many", bulk, lambda: node(url, "addbulk", bulk))
    meter.step("Worker", n + bulk, lambda: node(url, "work", n + bulk))


def memory_per_job(r: redis.Redis, fill: Callable[[int], None], jobs: int) -> float:
    r.flushall()
    fill(1)  # scripts loaded, connections made, the queue's own keys there
    time.sleep(0.2)
    before = int(r.info("memory")["used_memory"])
    fill(jobs)
    after = int(r.info("memory")["used_memory"])
    return (after - before) / jobs


def delayer_fill(r: redis.Redis, layout: str) -> Callable[[int], None]:
    url = url_of(r)
    calls = [0]

    def fill(jobs: int) -> None:
        calls[0] += 1
        with Delayer(url, layout=layout) as d:
            for lo in range(0, jobs, 10_000):
                d.push_many(Job(f"topic{i % 10}", f"job-{calls[0]}-{i}", 3600, BODY)
                            for i in range(lo, min(jobs, lo + 10_000)))

    return fill


def spread(xs: List[float], digits: int = 2) -> str:
    m = statistics.median(xs)
    if len(xs) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=20_000, help="single push, pop, reserve+ack")
    p.add_argument("--bulk", type=int, default=100_000, help="push_many, and what the Workers complete")
    p.add_argument("--memory-jobs", type=int, default=200_000)
    p.add_argument("--delayer-bin", default=str(ROOT / "target/release/delayer"))
    p.add_argument("--no-bullmq", action="store_true")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 round, 1,000 / 5,000 / 10,000 jobs")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.jobs, args.bulk, args.memory_jobs = 1, 1000, 5000, 10_000
    if args.jobs >= args.bulk:
        p.error("--jobs must be below --bulk (reserve+ack takes JOBS of the bulk jobs, the Worker the rest)")
    if not Path(args.delayer_bin).exists():
        p.error(f"no server binary at {args.delayer_bin} (cargo build --release -p delayer-server)")
    bullmq = not args.no_bullmq and shutil.which("node") is not None and \
        (ROOT / "bench/bullmq/node_modules/bullmq/package.json").exists()
    if not args.no_bullmq and not bullmq:
        print("lifecycle_cost: BullMQ skipped (node, or npm ci in bench/bullmq, missing)", file=sys.stderr)
    load0 = os.getloadavg()
    started = time.time()
    servers = [own_redis(), own_redis()]
    (_, rd, _), (_, rb, _) = servers
    systems = ["classic", "topic"] + (["BullMQ"] if bullmq else [])
    shares: Dict[str, Dict[str, Dict[str, float]]] = {s: {} for s in systems}
    results: Dict[str, List[Dict[str, Tuple[float, float, float]]]] = {s: [] for s in systems}

    def run(system: str, meter: Meter, n: int, bulk: int) -> None:
        if system == "BullMQ":
            bullmq_round(rb, meter, n, bulk)
        else:
            delayer_round(rd, meter, system, n, bulk, args.delayer_bin)

    try:
        for system in systems:  # the MONITOR pass: who sent which command
            print(f"[{time.time() - started:6.1f}s] calibrating {system}", file=sys.stderr)
            run(system, Meter(rb if system == "BullMQ" else rd, True, shares[system]),
                min(args.jobs, 500), min(args.bulk, 2000))
        for system in systems:
            sent = {step: sorted(c for c, v in share.items() if v > 0 and c not in NOT_COUNTED)
                    for step, share in shares[system].items()}
            print(f"{system}: commands clients sent per step (MONITOR): {sent}", file=sys.stderr)
        for k in range(args.rounds):
            for system in systems if k % 2 == 0 else systems[::-1]:
                meter = Meter(rb if system == "BullMQ" else rd, False, shares[system])
                run(system, meter, args.jobs, args.bulk)
                per = meter.per_job()
                results[system].append(per)
                print(f"[{time.time() - started:6.1f}s] round {k + 1} {system}: " +
                      ", ".join(f"{s} {v[0]:.2f}" for s, v in per.items()) + " us/job", file=sys.stderr)
        memory: Dict[str, float] = {}
        for layout in ("classic", "topic"):
            memory[layout] = memory_per_job(rd, delayer_fill(rd, layout), args.memory_jobs)
        if bullmq:
            url = url_of(rb)
            memory["BullMQ"] = memory_per_job(rb, lambda j: node(url, "pending", j), args.memory_jobs)
    finally:
        for proc, r, folder in servers:
            r.close()
            proc.kill()
            proc.wait()
            shutil.rmtree(folder, ignore_errors=True)
    load1 = os.getloadavg()
    report(args, results, memory, load0, load1, time.time() - started)


#: The lifecycles summed, and BullMQ's counterpart of each (None: it has none).
LIFECYCLES = [
    ("worker", "push + move + Worker", "add + Worker"),
    ("bulk", "push_many + move + Worker", "addBulk + Worker"),
    ("calls", "push + move + reserve + ack, one call each", None),
    ("once", "at most once: push + move + pop", None),
]


def lifecycles(per: Dict[str, Tuple[float, float, float]], i: int) -> Dict[str, float]:
    """One round's lifecycle sums (i: 0 Redis time, 2 Redis CPU)."""
    if "move" not in per:  # BullMQ: its Worker promotes the delayed jobs as it takes them
        return {"worker": per["push"][i] + per["Worker"][i], "bulk": per["push_many"][i] + per["Worker"][i]}
    return {"worker": per["push"][i] + per["move"][i] + per["Worker"][i],
            "bulk": per["push_many"][i] + per["move"][i] + per["Worker"][i],
            "calls": per["push"][i] + per["move"][i] + per["reserve+ack"][i],
            "once": per["push"][i] + per["move"][i] + per["pop"][i]}


def report(args: argparse.Namespace, results: Dict[str, List[Dict[str, Tuple[float, float, float]]]],
           memory: Dict[str, float], load0: Tuple[float, ...], load1: Tuple[float, ...], secs: float) -> None:
    systems = list(results)
    out = [f"- Command: `{' '.join(['bench/lifecycle_cost.py'] + sys.argv[1:])}` "
           f"(Python {sys.version.split()[0]}, SDK from {Path(sys.modules['delayer'].__file__).parent}); "
           f"server {args.delayer_bin}",
           f"- {args.rounds} rounds, {args.jobs:,} single calls and {args.bulk:,} bulk jobs each; took {secs:.0f} s; "
           f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end; {os.cpu_count()} CPUs; "
           f"redis-servers {'at nice -10' if NICE else 'at normal priority'}",
           "", "Redis time per job (INFO commandstats, us), median over the rounds (lowest-highest):", "",
           "| step | " + " | ".join({"topic": "per-topic"}.get(s, s) for s in systems) + " |",
           "| --- |" + " --- |" * len(systems)]
    steps = ["push", "push_many", "bare write", "move", "pop", "reserve+ack", "Worker"]
    names = {"push": "push (one call a job)", "push_many": "push_many (BullMQ: addBulk)",
             "bare write": "bare write script (ZADD + HSET + PEXPIRE)", "move": "move (the delayer server)",
             "reserve+ack": "reserve + ack (one call each)", "Worker": "Worker, concurrency 100 (reserve_many + acks; BullMQ: complete)"}

    def cell(system: str, step: str, i: int = 0) -> str:
        xs = [r[step][i] for r in results[system] if step in r]
        return spread(xs) if xs else "-"

    for step in steps:
        out.append(f"| {names.get(step, step)} | " + " | ".join(cell(s, step) for s in systems) + " |")
    life = {s: [lifecycles(r, 0) for r in results[s]] for s in systems}
    cpu_life = {s: [lifecycles(r, 2) for r in results[s]] for s in systems}

    def life_rows(sums: Dict[str, List[Dict[str, float]]]) -> None:
        for kind, ours, theirs in LIFECYCLES:
            label = f"**lifecycle: {ours}**" + (f" (BullMQ: {theirs})" if theirs else "")
            out.append(f"| {label} | " + " | ".join(
                spread([x[kind] for x in sums[s]]) if kind in sums[s][0] else "-" for s in systems) + " |")

    life_rows(life)
    out += ["", "Redis CPU per job (INFO used_cpu_user + used_cpu_sys, us: also reading and writing the sockets):", "",
            "| step | " + " | ".join({"topic": "per-topic"}.get(s, s) for s in systems) + " |",
            "| --- |" + " --- |" * len(systems)]
    for step in steps:
        out.append(f"| {names.get(step, step)} | " + " | ".join(cell(s, step, 2) for s in systems) + " |")
    life_rows(cpu_life)
    out += ["", "Same-run ratios (each round's own, median (lowest-highest)):", ""]
    for layout in ("classic", "topic"):
        rounds = results[layout]
        pm = [r["push_many"][0] / r["bare write"][0] for r in rounds]
        pm_cpu = [r["push_many"][2] / r["bare write"][2] for r in rounds]
        out.append(f"- {layout}: push_many / bare write script: Redis time {spread(pm)}x (target <= 1.2x), "
                   f"Redis CPU {spread(pm_cpu)}x")
        if "BullMQ" in results:
            for kind, ours, theirs in LIFECYCLES[:2]:
                ratio = [b[kind] / d[kind] for d, b in zip(life[layout], life["BullMQ"])]
                cpu = [b[kind] / d[kind] for d, b in zip(cpu_life[layout], cpu_life["BullMQ"])]
                out.append(f"- {layout}: BullMQ {theirs} / Delayer {ours}: Redis time {spread(ratio)}x "
                           f"(target >= 4x), Redis CPU {spread(cpu)}x")
    out += ["", f"Redis memory per pending job (used_memory delta over {args.memory_jobs:,} jobs due in 1 h, "
            "32-byte bodies, 10 topics; push_many / addBulk):", ""]
    out += [f"- {({'topic': 'per-topic'}).get(s, s)}: {v:.0f} B" for s, v in memory.items()]
    if "BullMQ" in memory:
        out += [f"- BullMQ / {({'topic': 'per-topic'}).get(s, s)}: {memory['BullMQ'] / memory[s]:.2f}x"
                for s in ("classic", "topic")]
    print("\n".join(out))


if __name__ == "__main__":
    main()
