"""What the flow-control benches share (flow_backlog.py, flow_limit.py): a
steady stream of one topic's jobs with a consumer measuring each job's
lateness, the real `delayer` server started on a private Redis, flow.lua
called directly, /metrics and INFO read-outs, percentiles and the wait for a
quiet machine. Both layouts: the key names and the push / flow script of a
layout come from the Python SDK's `Keys` (the one place that translates the
scripts' headers); the scripts' text is read from lua/.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Dict, List, Optional, Tuple

import redis

import scriptcost  # noqa: F401  (puts sdk-python/src on the path)
from delayer import Keys  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = "delayer:"


def script(name: str) -> str:
    with open(os.path.join(ROOT, "lua", name)) as f:
        return f.read()


def keys(layout: str = "classic") -> Keys:
    return Keys(P, layout)


def ready_key(topic: str, layout: str = "classic") -> str:
    return keys(layout).names(topic).ready


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class Stream:
    """A topic's pusher and consumer (topic Q by default); lateness per job,
    keyed by due time. One EVAL of push.lua (push_topic.lua) per job, job i at
    start + i / rate, delay `delay_ms`; the consumer BRPOPs the ready list."""

    def __init__(self, port: int, rate: int, delay_ms: int, layout: str = "classic", topic: str = "Q") -> None:
        self.port, self.rate, self.delay_ms = port, rate, delay_ms
        self.topic, self.names = topic, keys(layout).names(topic)
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
        n = self.names
        src = script(n.push_script + ".lua")
        t0, i = time.monotonic(), 0
        while not self.stop.is_set():
            at = t0 + i / self.rate
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                self.push_behind = max(self.push_behind, -wait)
            jid = f"q{i}"
            ks = [n.pool, n.bucket(jid), *n.counts]
            due = r.eval(src, len(ks), *ks, jid, self.topic, "x", self.delay_ms, 3600000, "", "", "", "", "",
                         P + "wake", "")
            self.due[jid.encode()] = float(due)
            self.pushed += 1
            i += 1

    def _consume(self) -> None:
        r = redis.Redis(port=self.port)
        while not (self.stop.is_set() and len(self.samples) >= self.pushed):
            got = r.brpop([self.names.ready], 0.2)
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
    """One `delayer` process: its conf, access / error / stdout logs in
    `workdir` (file names end in `-<name>` when a name is given, for several
    servers sharing a folder)."""

    def __init__(self, binary: str, port: int, metrics_port: int, workdir: str, log_level: str,
                 layout: str = "classic", name: str = "", timer_interval: int = 100, batch_size: int = 1000) -> None:
        tag = f"-{name}" if name else ""
        self.conf = os.path.join(workdir, f"delayer{tag}.conf")
        self.log = os.path.join(workdir, f"access{tag}.log")
        self.err = os.path.join(workdir, f"error{tag}.log")
        self.metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        with open(self.conf, "w") as f:
            f.write(f"""[delayer]
pid =
timer_interval = {timer_interval}
access_log = {self.log}
error_log = {self.err}
log_level = {log_level}
batch_size = {batch_size}
key_prefix = {P}
layout = {layout}
metrics_addr = 127.0.0.1:{metrics_port}
[redis]
url = redis://127.0.0.1:{port}/0
""")
        self.binary = binary
        self.proc: Optional[subprocess.Popen] = None
        self.out = os.path.join(workdir, f"stdout{tag}.log")

    def start(self) -> float:
        self.since = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        t = time.time()
        out = open(self.out, "a")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf], stdout=out, stderr=subprocess.STDOUT)
        return t

    def wait_up(self, timeout: float = 20) -> None:
        """Until its /metrics answers (the server is connected and running)."""
        wait_for(lambda: not self.scrape().startswith("# unavailable"), timeout, f"{self.metrics} to answer")

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


def flow(r: redis.Redis, topic: str, action: str, *limit: str, layout: str = "classic") -> list:
    """One call of flow.lua (flow_topic.lua): action get, pause, resume, limit
    (then `limit` is per_second[, burst]) or unlimit. Its reply, as Redis
    sends it (six fields since issue 23's limit)."""
    n = keys(layout).names(topic)
    ks = [n.flow, n.gate, *n.flow_tail]
    return r.eval(script(n.flow_script + ".lua"), len(ks), *ks, topic, action, P + "wake", *limit)


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
