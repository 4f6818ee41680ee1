"""A paused topic's 1 M due backlog in the classic layout (issue 23): does it
slow or block another topic's moves, and how fast does it drain on resume?

usage (from the repository root, after building the release server):

    CARGO_TARGET_DIR=/work/target-bench cargo build --release -j 2 -p delayer-server
    nice -n -10 .venv/bin/python bench/flow_backlog.py --delayer /work/target-bench/release/delayer \
        [--backlog 1000000] [--rate 500] [--delay-ms 200] [--control-secs 30] [--held-secs 30]

One private redis-server (scriptcost.start_redis: a free loopback port,
--save "" --appendonly no) and the real `delayer` server (classic layout,
timer_interval 100 ms, batch_size 1000, metrics_addr set so move.lua builds
its lateness list as in production), started afresh for each phase after a
FLUSHALL. In every phase a pusher thread sends topic Q a steady stream
(`--rate` jobs/s, job i at start + i / rate, one EVAL of lua/push.lua each,
delay `--delay-ms`) and a consumer thread BRPOPs Q's ready list. A Q job's
lateness is its pop time (this machine's wall clock, just after BRPOP
returned) minus its due time (what push.lua returned: Redis's clock on the
same machine, whole ms), so it counts the server's wake-up and move and the
consumer's wake-up. The server's own measure is beside it: at log_level
debug (the default here) each move.lua batch logs its oldest id's lateness
(`oldest_late_ms`, Redis's clock); a batch that moved only Q counts that
value once per job it moved (an upper bound per job; batches that also set
P's ids aside, or moved R's, are not counted: their oldest id is P's or R's).
Jobs are grouped by their due time into the windows below; each window's
p50 / p99 / max is compared with the control run's. Run it at nice -n -10
on a shared machine: the consumer thread's wake-ups are the noisiest part.

  control  no backlog: Q's stream only (`--control-secs`).
  plain    the baseline drain: `--backlog` jobs of topic R due in the past
           (an unpaused topic), then the server starts: time until R's ready
           list holds them all. Q's stream runs meanwhile.
  held     `--backlog` jobs of topic P due in the past, P paused by an EVAL
           of lua/flow.lua, then the server starts: time until P's flow pool
           holds them all (the set-aside), P's ready list polled all along
           (must stay empty), then `--held-secs` of Q's stream with P held;
           then P is resumed (flow.lua again) while Q's stream runs: time
           until P's ready list holds them all (the drain; split into the
           wait for the server to see the resume, a paused topic being asked
           again once a second, and the drain from P's first ready id), and
           Q's lateness meanwhile. Then P's ready list is checked: N ids,
           first due first out, flow pool empty, P out of flow_topics.

The backlogs are written before the server starts, as push.lua leaves a job
(a bucket hash {topic, body}, ZADD job_pool, HINCRBY scheduled_count) by a
Lua loop 10,000 jobs a call, due 1 ms apart ending 60 s ago. Redis's cost
per job is INFO commandstats' cmdstat_evalsha (the server's scripts only:
the pusher uses EVAL) over each window, divided by the backlog: it includes
Q's moves and the server's other per-tick scripts (small beside 1 M).
About 2 minutes at the defaults on 2 vCPUs. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Dict, List, Optional, Tuple

import redis

from scriptcost import start_redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = "delayer:"
FILL = """
local n0, n, topic, base = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local args = {}
for i = n0, n0 + n - 1 do
  local id = topic .. ':' .. i
  redis.call('HSET', KEYS[2] .. id, 'topic', topic, 'body', 'x')
  local ms = base + i
  args[#args + 1] = string.format('%d.%03d', math.floor(ms / 1000), ms % 1000)
  args[#args + 1] = id
  if #args >= 2000 then redis.call('ZADD', KEYS[1], unpack(args)); args = {} end
end
if #args > 0 then redis.call('ZADD', KEYS[1], unpack(args)) end
redis.call('HINCRBY', KEYS[3], topic, n)
return n
"""


def script(name: str) -> str:
    with open(os.path.join(ROOT, "lua", name)) as f:
        return f.read()


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class Stream:
    """Topic Q's pusher and consumer; lateness per job, keyed by due time."""

    def __init__(self, port: int, rate: int, delay_ms: int) -> None:
        self.port, self.rate, self.delay_ms = port, rate, delay_ms
        self.due: Dict[bytes, float] = {}
        self.samples: List[Tuple[float, float]] = []  # (due, lateness ms)
        self.pushed = 0
        self.push_behind = 0.0  # worst lag of the pusher behind its schedule, s
        self.stop = threading.Event()
        self.threads: List[threading.Thread] = []

    def start(self) -> None:
        self.stop.clear()
        self.threads = [threading.Thread(target=self._push), threading.Thread(target=self._consume)]
        for t in self.threads:
            t.start()

    def finish(self, tail: float = 2.0) -> None:
        self.stop.set()
        self.threads[0].join()
        deadline = time.time() + tail + self.delay_ms / 1000
        while len(self.samples) < self.pushed and time.time() < deadline:
            time.sleep(0.05)
        self.threads[1].join()

    def _push(self) -> None:
        r = redis.Redis(port=self.port)
        src = script("push.lua")
        keys = [P + "job_pool", None, P + "scheduled_count"]
        t0, i = time.monotonic(), 0
        while not self.stop.is_set():
            at = t0 + i / self.rate
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                self.push_behind = max(self.push_behind, -wait)
            jid = f"q{i}"
            keys[1] = P + "job_bucket:" + jid
            due = r.eval(src, 3, *keys, jid, "Q", "x", self.delay_ms, 3600000, "", "", "", "", "",
                         P + "wake", "")
            self.due[jid.encode()] = float(due)
            self.pushed += 1
            i += 1

    def _consume(self) -> None:
        r = redis.Redis(port=self.port)
        while not (self.stop.is_set() and len(self.samples) >= self.pushed):
            got = r.brpop([P + "ready_queue:Q"], 0.2)
            if got is None:
                if self.stop.is_set() and time.time() > self._last_due() + 2:
                    return
                continue
            now = time.time()
            due = self.due.get(got[1])
            if due is not None:
                self.samples.append((due, (now - due) * 1000))

    def _last_due(self) -> float:
        return max(self.due.values()) if self.due else 0.0

    def window(self, lo: float, hi: float) -> List[float]:
        return [late for due, late in self.samples if lo <= due < hi]


class Server:
    def __init__(self, binary: str, port: int, metrics_port: int, workdir: str, log_level: str) -> None:
        self.conf = os.path.join(workdir, "delayer.conf")
        self.log = os.path.join(workdir, "access.log")
        self.err = os.path.join(workdir, "error.log")
        self.metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        with open(self.conf, "w") as f:
            f.write(f"""[delayer]
pid =
timer_interval = 100
access_log = {self.log}
error_log = {self.err}
log_level = {log_level}
batch_size = 1000
key_prefix = {P}
layout = classic
metrics_addr = 127.0.0.1:{metrics_port}
[redis]
url = redis://127.0.0.1:{port}/0
""")
        self.binary = binary
        self.proc: Optional[subprocess.Popen] = None
        self.out = os.path.join(workdir, "stdout.log")

    def start(self) -> float:
        self.since = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        t = time.time()
        out = open(self.out, "a")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf], stdout=out, stderr=subprocess.STDOUT)
        return t

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def batches(self) -> List[Tuple[float, int, float]]:
        """Q's batches since the last start (empty below log_level debug)."""
        return server_lateness(self.log, self.since) if os.path.exists(self.log) else []

    def scrape(self) -> str:
        try:
            return urllib.request.urlopen(self.metrics, timeout=2).read().decode()
        except OSError as e:
            return f"# unavailable: {e}"


def fill(r: redis.Redis, topic: str, n: int) -> float:
    """n jobs of `topic` due in the past; returns the seconds it took."""
    t = time.time()
    now_ms = int(float(r.time()[0]) * 1000)
    base = now_ms - 60000 - n  # the last one due 60 s ago
    sha = r.script_load(FILL)
    step = 10000
    for n0 in range(0, n, step):
        r.evalsha(sha, 3, P + "job_pool", P + "job_bucket:", P + "scheduled_count", n0, min(step, n - n0), topic, base)
    return time.time() - t


def flow(r: redis.Redis, topic: str, action: str) -> list:
    return r.eval(script("flow.lua"), 4, P + "flow:" + topic, P + "flow_gate:" + topic, P + "flow_topics",
                  P + "flow_pool:" + topic, topic, action, P + "wake")


def evalsha(r: redis.Redis) -> Tuple[int, int]:
    s = r.info("commandstats").get("cmdstat_evalsha", {})
    return s.get("usec", 0), s.get("calls", 0)


def hist(metrics: str, name: str) -> str:
    """A histogram of a /metrics text (no labels): count, mean, and how many
    exceeded the top buckets, e.g. "1234 ticks, mean 2.1 ms, 3 > 0.25 s"."""
    buckets: List[Tuple[float, float]] = []
    total = count = 0.0
    for line in metrics.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
        elif line.startswith(name + "_sum"):
            total = float(line.split()[-1])
        elif line.startswith(name + "_count"):
            count = float(line.split()[-1])
    if not count:
        return "none"
    over = [f"{count - n:.0f} > {le * 1000:g} ms" for le, n in buckets if le in (0.005, 0.1, 1.0)]
    return f"{count:.0f}, mean {total / count * 1000:.2f} ms, " + ", ".join(over)


def wait_for(cond, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise SystemExit(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.005)


LOG_LINE = re.compile(r"^\[(\S+)Z\] \[DEBUG\] moved (\d+) \[(.*?)\] .*oldest_late_ms=(\d+)")


def server_lateness(log: str, since: int) -> List[Tuple[float, int, float]]:
    """(time, jobs, oldest_late_ms) of each move.lua batch that moved only Q,
    from the access log at debug level (its lines after byte `since`): how
    late the batch's oldest id became ready, by the server's own measure."""
    out = []
    with open(log) as f:
        f.seek(since)
        for line in f:
            m = LOG_LINE.match(line)
            if m and re.fullmatch(r"Q=\d+", m.group(3)):
                at = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
                out.append((at, int(m.group(2)), float(m.group(4))))
    return out


def weighted(batches: List[Tuple[float, int, float]], lo: float, hi: float) -> List[float]:
    """Each batch's oldest_late_ms once per job it moved (an upper bound per job)."""
    return [late for at, n, late in batches if lo <= at - late / 1000 < hi for _ in range(n)]


def slowlog(r: redis.Redis) -> str:
    """What Redis's slow log holds (commands over 20 ms, set by main), then reset."""
    entries = r.slowlog_get(128)
    r.slowlog_reset()
    if not entries:
        return "none over 20 ms"
    worst = max(entries, key=lambda e: e["duration"])
    cmd = worst["command"]
    cmd = (cmd.decode(errors="replace") if isinstance(cmd, bytes) else str(cmd))[:60]
    return f"{len(entries)} over 20 ms, longest {worst['duration'] / 1000:.1f} ms ({cmd})"


def wait_load(limit: float, until: float) -> str:
    while True:
        load = os.getloadavg()[0]
        if load < limit or time.time() > until:
            return f"{load:.2f}"
        print(f"load {load:.2f} >= {limit}: waiting", file=sys.stderr)
        time.sleep(15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delayer", default=os.path.join(ROOT, "target", "release", "delayer"))
    ap.add_argument("--backlog", type=int, default=1000000)
    ap.add_argument("--rate", type=int, default=500, help="Q's jobs/s")
    ap.add_argument("--delay-ms", type=int, default=200)
    ap.add_argument("--control-secs", type=float, default=30)
    ap.add_argument("--held-secs", type=float, default=30, help="Q's stream with P held, after the set-aside")
    ap.add_argument("--log-level", default="debug",
                    help="debug: the server's per-batch lines give its own lateness of Q's batches")
    ap.add_argument("--timeout", type=float, default=900, help="give up on a drain after this many s")
    ap.add_argument("--max-load", type=float, default=1.5, help="wait (up to --load-wait s) for a lower load")
    ap.add_argument("--load-wait", type=float, default=120)
    ap.add_argument("--keep", action="store_true", help="keep the server's logs (their folder is printed)")
    a = ap.parse_args()

    workdir = tempfile.mkdtemp(prefix="flow_backlog.")
    srv, r = start_redis()
    port = r.connection_pool.connection_kwargs["port"]
    s = socket.socket(); s.bind(("127.0.0.1", 0)); mport = s.getsockname()[1]; s.close()
    server = Server(a.delayer, port, mport, workdir, a.log_level)
    rows: List[Tuple[str, str]] = []
    loads: List[str] = []
    N = a.backlog
    r.config_set("slowlog-log-slower-than", 20000)
    slow: List[Tuple[str, str]] = []
    try:
        # ---- control
        loads.append("control " + wait_load(a.max_load, time.time() + a.load_wait))
        r.flushall()
        r.slowlog_reset()
        server.start()
        time.sleep(0.3)
        q = Stream(port, a.rate, a.delay_ms)
        q.start()
        time.sleep(a.control_secs)
        q.finish()
        m_control = server.scrape()
        server.stop()
        slow.append(("control", slowlog(r)))
        control = q.window(0, float("inf"))
        c50, c99 = pct(control, 0.5), pct(control, 0.99)
        sc = weighted(server.batches(), 0, float("inf"))
        s50, s99 = pct(sc, 0.5), pct(sc, 0.99)
        print(f"control: {len(control)}/{q.pushed} popped, p50 {c50:.2f} p99 {c99:.2f} ms", file=sys.stderr)

        def late_row(name: str, q: Stream, batches, lo: float, hi: float, control: bool = False) -> None:
            xs, ss = q.window(lo, hi), weighted(batches, lo, hi)
            if not xs:
                rows.append((name, "no Q job due in this window"))
                return
            p50, p99 = pct(xs, 0.5), pct(xs, 0.99)
            text = f"consumer: n={len(xs)}, p50 {p50:.2f} / p99 {p99:.2f} / max {max(xs):.1f} ms"
            if not control:
                text += f" ({p50 / c50:.2f}x / {p99 / c99:.2f}x control)"
            if ss:
                q50, q99 = pct(ss, 0.5), pct(ss, 0.99)
                text += f"; server: n={len(ss)}, p50 {q50:.0f} / p99 {q99:.0f} / max {max(ss):.0f} ms"
            rows.append((name, text))

        late_row("Q lateness, control (no backlog)", q, server.batches(), 0, float("inf"), control=True)
        rows.append(("Q pushed / popped, control", f"{q.pushed} / {len(q.samples)}; pusher at most "
                                                   f"{q.push_behind * 1000:.0f} ms behind its schedule"))

        # ---- plain drain (baseline)
        loads.append("plain " + wait_load(a.max_load, time.time() + a.load_wait))
        r.flushall()
        took = fill(r, "R", N)
        print(f"plain: filled {N} in {took:.1f} s", file=sys.stderr)
        r.config_resetstat()
        r.slowlog_reset()
        q = Stream(port, a.rate, a.delay_ms)
        q.start()
        t_start = server.start()
        first = None
        while True:
            n = r.llen(P + "ready_queue:R")
            if n and first is None:
                first = time.time()
            if n >= N:
                break
            if time.time() - t_start > a.timeout:
                raise SystemExit(f"plain drain: {n} ready after {a.timeout} s")
            time.sleep(0.005)
        t_done = time.time()
        u, c = evalsha(r)
        time.sleep(5)
        q.finish()
        m_plain = server.scrape()
        server.stop()
        slow.append(("plain", slowlog(r)))
        batches = server.batches()
        plain_secs = t_done - t_start
        plain_rate = N / plain_secs
        rows.append(("plain drain (unpaused R, 1 pool): server start -> LLEN ready R = N",
                     f"{plain_secs:.2f} s = {plain_rate:,.0f} jobs/s (first id ready after {(first - t_start) * 1000:.0f} ms)"))
        plain_cost = u / N
        rows.append(("Redis per job, plain move (evalsha usec / N)", f"{plain_cost:.2f} us ({c} calls)"))
        late_row("Q lateness, due during the plain drain", q, batches, 0, t_done)
        late_row("Q lateness, due after it", q, batches, t_done, float("inf"))

        # ---- held, then resumed
        loads.append("held " + wait_load(a.max_load, time.time() + a.load_wait))
        r.flushall()
        took = fill(r, "P", N)
        print(f"held: filled {N} in {took:.1f} s", file=sys.stderr)
        reply = flow(r, "P", "pause")
        assert reply[0], reply
        r.config_resetstat()
        r.slowlog_reset()
        q = Stream(port, a.rate, a.delay_ms)
        q.start()
        t_start = server.start()
        ready_p_max = 0
        while True:
            ready_p_max = max(ready_p_max, r.llen(P + "ready_queue:P"))
            if r.zcard(P + "flow_pool:P") >= N:
                break
            if time.time() - t_start > a.timeout:
                raise SystemExit(f"set-aside: {r.zcard(P + 'flow_pool:P')} set aside after {a.timeout} s")
            time.sleep(0.005)
        t_aside = time.time()
        u, c = evalsha(r)
        aside_secs = t_aside - t_start
        rows.append(("set-aside: server start -> ZCARD flow_pool:P = N",
                     f"{aside_secs:.2f} s = {N / aside_secs:,.0f} jobs/s; vs plain drain {plain_secs / aside_secs:.2f}x as fast"))
        rows.append(("Redis per job, set-aside (evalsha usec / N)",
                     f"{u / N:.2f} us ({c} calls); vs plain move {u / N / plain_cost:.2f}x"))
        end = time.time() + a.held_secs
        while time.time() < end:
            ready_p_max = max(ready_p_max, r.llen(P + "ready_queue:P"))
            time.sleep(0.02)
        pool_left = r.zcard(P + "job_pool")
        rows.append(("P's ready list while paused (LLEN polled every 5-20 ms)",
                     f"max {ready_p_max}; job_pool left {pool_left}; scheduled_count P "
                     f"{(r.hget(P + 'scheduled_count', 'P') or b'-').decode()}"))
        r.config_resetstat()
        reply = flow(r, "P", "resume")
        t_resume = float(reply[2])
        assert reply[1] == 1, reply
        wait_for(lambda: r.llen(P + "ready_queue:P") > 0, a.timeout, "P's first ready id")
        t_first = time.time()
        wait_for(lambda: r.llen(P + "ready_queue:P") >= N, a.timeout, "P's drain")
        t_drained = time.time()
        u, c = evalsha(r)
        drain_secs = t_drained - t_resume
        rows.append(("drain after resume: resume -> LLEN ready P = N",
                     f"{drain_secs:.2f} s = {N / drain_secs:,.0f} jobs/s; vs plain drain {plain_secs / drain_secs:.2f}x as fast"))
        moving = t_drained - t_first
        rows.append(("of which: resume -> first P id ready; then -> all",
                     f"{(t_first - t_resume) * 1000:.0f} ms; {moving:.2f} s = {N / moving:,.0f} jobs/s "
                     f"(plain drain from its first ready id: {N / (t_done - first):,.0f} jobs/s, "
                     f"{(t_done - first) / moving:.2f}x)"))
        rows.append(("Redis per job, drain (evalsha usec / N)",
                     f"{u / N:.2f} us ({c} calls); vs plain move {u / N / plain_cost:.2f}x"))
        time.sleep(5)
        q.finish()
        left = (r.zcard(P + "flow_pool:P"), r.sismember(P + "flow_topics", "P"),
                r.hget(P + "scheduled_count", "P"), r.llen(P + "ready_queue:P"))
        ends = (r.lindex(P + "ready_queue:P", -1), r.lindex(P + "ready_queue:P", 0))
        metrics = server.scrape()
        server.stop()
        slow.append(("held + drain", slowlog(r)))
        batches = server.batches()
        rows.append(("after the drain: flow_pool:P, in flow_topics, scheduled_count P, LLEN ready P",
                     f"{left[0]}, {bool(left[1])}, {(left[2] or b'-').decode()}, {left[3]} "
                     f"(first out {ends[0].decode()}, last {ends[1].decode()})"))
        late_row("Q lateness, due during the set-aside", q, batches, 0, t_aside)
        late_row("Q lateness, due while P held (after the set-aside)", q, batches, t_aside, t_resume)
        late_row("Q lateness, due during P's drain", q, batches, t_resume, t_drained)
        late_row("Q lateness, due after P's drain", q, batches, t_drained, float("inf"))
        rows.append(("Q pushed / popped, held run", f"{q.pushed} / {len(q.samples)}; pusher at most "
                                                    f"{q.push_behind * 1000:.0f} ms behind its schedule"))
        for phase, m in (("control", m_control), ("plain", m_plain), ("held + drain", metrics)):
            rows.append((f"server ticks / move calls, {phase} (/metrics)",
                         f"ticks {hist(m, 'delayer_tick_duration_seconds')}; "
                         f"calls {hist(m, 'delayer_batch_duration_seconds')}"))
        for phase, text in slow:
            rows.append((f"Redis SLOWLOG, {phase} (fills and FLUSHALL excluded)", text))
        loads.append("end " + f"{os.getloadavg()[0]:.2f}")
    finally:
        server.stop()
        srv.terminate()
        srv.wait()

    print(f"\nbacklog {N:,}, Q {a.rate}/s delay {a.delay_ms} ms, timer_interval 100 ms, batch_size 1000; "
          f"load (1 min) {', '.join(loads)}\n")
    print("| measure | result |")
    print("| --- | --- |")
    for k, v in rows:
        print(f"| {k} | {v} |")
    with open(server.err) if os.path.exists(server.err) else open(os.devnull) as f:
        errs = f.read().splitlines()
    print(f"\nserver error log: {len(errs)} lines", *errs[:20], sep="\n  ")
    print(f"server logs in {workdir}" if a.keep else "")
    if not a.keep:
        for name in os.listdir(workdir):
            os.remove(os.path.join(workdir, name))
        os.rmdir(workdir)


if __name__ == "__main__":
    main()
