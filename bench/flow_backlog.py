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
import os
import socket
import sys
import tempfile
import time
from typing import List, Tuple

import redis

from flowkit import (P, ROOT, Server, Stream, evalsha, flow, hist, pct, slowlog, wait_for, wait_load,
                     weighted)
from scriptcost import start_redis

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
