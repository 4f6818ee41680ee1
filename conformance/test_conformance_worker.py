"""One worker specification (PROTOCOL.md, "The Worker runtime"), five
runtimes: the Rust Workers (threads and tokio), the Python Workers (threads
and asyncio) and the PHP Worker run the same scenarios against a real
redis-server and the real delayer server, each recording its hook calls as
JSON lines (drivers/python_worker.py, drivers/php_worker.php,
rust-driver/src/worker_mode.rs). Every runtime must produce the same record:

* jobs: per job, the hooks in order with the attempt they saw (a success is
  acked; a failure is retried after its backoff, then dead; a panic is a
  failure; a hook that fails changes nothing), and where each job ends up;
* stop: SIGTERM with a job in flight that ends within the grace period (acked
  before the worker stops), and one that outlasts it (released due at once,
  the same last error in every SDK);
* Redis lost while the worker waits: the retries back off 0.1 s doubling to
  at most 1 s, the worker says it is back once Redis answers, and works on.

A stack of its own (redis-server and delayer server), so that restarting
Redis disturbs no other test. Both layouts (CONFORMANCE_LAYOUT).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import harness
from conftest import LAYOUT, PREFIX, TIMER_INTERVAL_MS

RUNTIMES = ["rust", "rust-aio", "python", "python-aio", "php"]
#: What every SDK records on a job released at the end of a stop's grace period.
STOPPED = "WorkerStopped: the worker stopped before the handler finished"
#: The Redis-loss backoff: first pause, and the longest.
FIRST_PAUSE, MOST_PAUSE = 0.1, 1.0
DEADLINE = 20.0


class Stack:
    """redis-server (restartable on its port) and the delayer server."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.redis = harness.RedisServer(workdir)
        self.server = harness.DelayerServer(workdir, self.redis, PREFIX, TIMER_INTERVAL_MS, LAYOUT)
        self.drivers = harness.Drivers(self.redis, PREFIX, workdir, LAYOUT)
        self.argv: Optional[List[str]] = None

    def redis_down(self) -> None:
        """Kill redis-server (remembering how it was started)."""
        assert self.redis.proc is not None
        self.argv = list(self.redis.proc.args)  # type: ignore[arg-type]
        harness.stop_process(self.redis.proc)
        self.redis.proc = None

    def redis_up(self) -> None:
        """Start redis-server again on the same port (empty: no persistence)."""
        assert self.argv is not None
        self.redis.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, preexec_fn=harness._die_with_parent)
        assert harness.wait_until(self.redis._pings), "redis-server did not come back"

    def stop(self) -> None:
        self.drivers.stop_all()
        self.server.stop()
        self.redis.stop()


@pytest.fixture(scope="module")
def stack(workdir: Path) -> Iterator[Stack]:
    s = Stack(workdir / "worker-stack")
    try:
        yield s
    finally:
        s.stop()


class WorkerProc:
    """One worker process of ``runtime``, its JSON lines gathered as they come."""

    def __init__(self, stack: Stack, runtime: str, topic: str, grace_ms: int, ttr_ms: int = 10_000) -> None:
        self.runtime = runtime
        lang, aio = runtime.split("-")[0], runtime.endswith("-aio")
        redis = stack.redis
        if lang == "rust":  # options a delayer.conf cannot give (rust-driver/src/worker_mode.rs)
            connect = ["--url", redis.url, "--prefix", PREFIX, "--layout", LAYOUT]
        elif LAYOUT == "classic":
            connect = (["--host", "127.0.0.1", "--port", str(redis.port), "--prefix", PREFIX] if lang == "php"
                       else ["--url", redis.url, "--prefix", PREFIX])
        else:
            conf = stack.workdir / f"{runtime}-worker.conf"
            conf.write_text(harness.conf_text(redis, PREFIX, LAYOUT))
            connect = ["--config", str(conf)]
        if lang == "rust":
            exe = harness.binary("DELAYER_DRIVER_BIN", "delayer-conformance-driver", "delayer-conformance-driver")
            program = [str(exe), "worker"]
        elif lang == "python":
            program = [sys.executable, str(harness.HERE / "drivers" / "python_worker.py")]
        else:
            php = shutil.which(os.environ.get("PHP", "php"))
            if php is None:
                pytest.skip("php is not installed")
            harness.driver_argv("php", redis, PREFIX)  # composer dump-autoload, if needed
            program = [php, str(harness.HERE / "drivers" / "php_worker.php")]
        argv = program + (["--aio"] if aio else []) + connect + [
            "--topic", topic, "--concurrency", "1" if lang == "php" else "4",
            "--ttr-ms", str(ttr_ms), "--grace-ms", str(grace_ms)]
        self.log = stack.workdir / f"worker-{runtime}.log"
        self._log = open(self.log, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log,
                                     preexec_fn=harness._die_with_parent)
        self.events: List[Dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda evs: any(e["ev"] == "running" for e in evs), "start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"ev": "garbage", "line": line.decode(errors="replace")}
            event["t"] = round(time.monotonic() - self.t0, 3)  # when it came, for failure messages
            with self._lock:
                self.events.append(event)

    def snapshot(self) -> List[Dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def wait_for(self, done: Callable[[List[Dict[str, Any]]], bool], what: str, deadline: float = DEADLINE) -> None:
        def check() -> bool:
            if self.proc.poll() is not None and not done(self.snapshot()):
                self._reader.join(2)
                raise AssertionError(f"{self.runtime} worker exited ({self.proc.returncode}) before {what}: "
                                     f"{self.snapshot()} {harness.tail(self.log)}")
            return done(self.snapshot())

        assert harness.wait_until(check, deadline), \
            f"{self.runtime} worker: no {what} within {deadline} s: {self.snapshot()} {harness.tail(self.log)}"

    def term(self) -> int:
        """SIGTERM, then its exit code (it must stop by itself)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(DEADLINE)
        finally:
            self.kill()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


@pytest.fixture
def worker_of(stack: Stack) -> Iterator[Callable[..., WorkerProc]]:
    started: List[WorkerProc] = []

    def start(*args: Any, **kwargs: Any) -> WorkerProc:
        w = WorkerProc(stack, *args, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


def push(stack: Stack, topic: str, job_id: str, body: str, **retry: Any) -> None:
    req = {"op": "push", "topic": topic, "id": job_id, "delay_ms": 0,
           "body_b64": base64.b64encode(body.encode()).decode(), **retry}
    harness.ok(stack.drivers, "python", req)


def lookup(stack: Stack, topic: str, job_id: str) -> Dict[str, Any]:
    return harness.ok(stack.drivers, "python", {"op": "job", "topic": topic, "id": job_id})["job"]


def per_job(events: List[Dict[str, Any]], job_id: str) -> List[Tuple[str, int]]:
    return [(e["ev"], e["attempts"]) for e in events if e.get("id") == job_id]


BACKOFF = {"kind": "fixed", "delay_ms": 100}
#: job name -> (body, retry settings, the hooks it gets, in order, with attempts; where it ends)
JOBS: Dict[str, Tuple[str, Dict[str, Any], List[Tuple[str, int]], Tuple[str, int]]] = {
    "ok": ("ok", {}, [("started", 1), ("succeeded", 1), ("acked", 1)], ("unknown", 0)),
    "flaky": ("fail-once", {"max_attempts": 3, "backoff": BACKOFF},
              [("started", 1), ("failed", 1), ("started", 2), ("succeeded", 2), ("acked", 2)], ("unknown", 0)),
    "dead": ("fail", {"max_attempts": 2, "backoff": BACKOFF},
             [("started", 1), ("failed", 1), ("started", 2), ("failed", 2)], ("dead", 2)),
    "panic": ("panic", {"max_attempts": 1}, [("started", 1), ("failed", 1)], ("dead", 1)),
    # The started hook of a job whose id starts with "hookfail" fails.
    "hookfail": ("ok", {}, [("started", 1), ("succeeded", 1), ("acked", 1)], ("unknown", 0)),
}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_jobs_get_the_same_hooks_and_end_alike(stack: Stack, worker_of: Callable[..., WorkerProc],
                                               runtime: str) -> None:
    topic = f"wk-jobs-{runtime}"
    w = worker_of(runtime, topic, grace_ms=2000)
    ids = {name: f"{name}-{runtime}" for name in JOBS}
    for name, (body, retry, _, _) in JOBS.items():
        push(stack, topic, ids[name], body, **retry)

    def finished(evs: List[Dict[str, Any]]) -> bool:
        return all(len(per_job(evs, ids[name])) >= len(hooks) for name, (_, _, hooks, _) in JOBS.items())

    w.wait_for(finished, "every job's last hook")
    assert w.term() == 0, harness.tail(w.log)
    events = w.snapshot()
    record = {name: per_job(events, ids[name]) for name in JOBS}
    assert record == {name: hooks for name, (_, _, hooks, _) in JOBS.items()}, events
    worker_level = [e["ev"] for e in events if "id" not in e and e["ev"] != "running"]
    assert worker_level == ["stopping", "stopped"], events
    for name, (_, _, _, (state, attempts)) in JOBS.items():
        job = lookup(stack, topic, ids[name])
        assert job["state"] == state, (name, job)
        if state == "dead":
            assert job["attempts"] == attempts, (name, job)
            assert job["last_error"] and job["last_error"].endswith("boom"), (name, job)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_stop_lets_a_job_finish_within_grace_and_releases_one_past_it(
        stack: Stack, worker_of: Callable[..., WorkerProc], runtime: str) -> None:
    topic = f"wk-stop-{runtime}"
    # Within the grace period: it ends, its ack is sent, then the worker stops.
    quick = f"quick-{runtime}"
    w = worker_of(runtime, topic, grace_ms=5000)
    push(stack, topic, quick, "sleep:700")
    w.wait_for(lambda evs: per_job(evs, quick) == [("started", 1)], "start of the quick job")
    assert w.term() == 0, harness.tail(w.log)
    events = w.snapshot()
    assert per_job(events, quick) == [("started", 1), ("succeeded", 1), ("acked", 1)], events
    assert [e["ev"] for e in events][-1] == "stopped", events
    assert lookup(stack, topic, quick)["state"] == "unknown"

    # Past it: released, due at once, with the same last error in every SDK.
    slow = f"slow-{runtime}"
    w = worker_of(runtime, topic, grace_ms=1000)
    push(stack, topic, slow, "sleep:30000", max_attempts=3)
    w.wait_for(lambda evs: per_job(evs, slow) == [("started", 1)], "start of the slow job")
    assert w.term() == 0, harness.tail(w.log)
    events = w.snapshot()
    assert per_job(events, slow) == [("started", 1), ("released_at_stop", 1)], events
    worker_level = [e["ev"] for e in events if "id" not in e and e["ev"] != "running"]
    assert worker_level == ["stopping", "stopped"], events
    job = lookup(stack, topic, slow)
    assert job["state"] in ("ready", "scheduled"), job
    assert (job["attempts"], job["last_error"]) == (1, STOPPED), job


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_redis_lost_while_waiting_backs_off_to_one_second_and_recovers(
        stack: Stack, worker_of: Callable[..., WorkerProc], runtime: str) -> None:
    topic = f"wk-outage-{runtime}"
    w = worker_of(runtime, topic, grace_ms=2000)
    before, after = f"before-{runtime}", f"after-{runtime}"
    push(stack, topic, before, "ok")
    w.wait_for(lambda evs: ("acked", 1) in per_job(evs, before), "the first job's ack")
    stack.redis_down()
    try:
        # Five failed tries: 0.1 + 0.2 + 0.4 + 0.8 s, and the fifth pause is at its most.
        w.wait_for(lambda evs: sum(e["ev"] == "connection_lost" for e in evs) >= 5, "five failed tries")
    finally:
        stack.redis_up()
    w.wait_for(lambda evs: any(e["ev"] == "reconnected" for e in evs), "reconnected")
    push(stack, topic, after, "ok")
    w.wait_for(lambda evs: ("acked", 1) in per_job(evs, after), "the ack of a job pushed after the outage")
    assert w.term() == 0, harness.tail(w.log)
    events = w.snapshot()
    pauses = [e["retry_in"] for e in events if e["ev"] == "connection_lost"]
    assert pauses[:5] == pytest.approx([FIRST_PAUSE, 0.2, 0.4, 0.8, MOST_PAUSE]), pauses
    assert max(pauses) <= MOST_PAUSE + 1e-9, pauses
    lost_at = [i for i, e in enumerate(events) if e["ev"] == "connection_lost"]
    back_at = [i for i, e in enumerate(events) if e["ev"] == "reconnected"]
    assert len(back_at) == 1 and back_at[0] > lost_at[-1], events
    assert per_job(events, after) == [("started", 1), ("succeeded", 1), ("acked", 1)], events


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_worker_starts_nothing_of_a_paused_topic_and_everything_once_after_the_resume(
        stack: Stack, worker_of: Callable[..., WorkerProc], runtime: str) -> None:
    """Issue 23: the Worker runtimes obey a pause with no change of their own
    (their waits go through the same scripts), and cheaply: a paused worker
    waits on the topic's gate instead of asking Redis in a loop."""
    topic = f"wk-pause-{runtime}"
    w = worker_of(runtime, topic, grace_ms=2000)
    first = f"first-{runtime}"
    push(stack, topic, first, "ok")
    w.wait_for(lambda evs: ("acked", 1) in per_job(evs, first), "the first job's ack")
    assert harness.ok(stack.drivers, "rust", {"op": "pause", "topic": topic})["changed"]
    ids = [f"held-{runtime}-{i}" for i in range(5)]
    for job_id in ids:
        push(stack, topic, job_id, "ok")
    r = stack.redis.client()
    calls = lambda: sum(v["calls"] for k, v in r.info("commandstats").items()  # noqa: E731
                        if k.split("_", 1)[1] in ("evalsha", "eval"))
    before = calls()
    time.sleep(2.0)
    started = [e for e in w.snapshot() if e.get("id") in ids]
    assert started == [], f"{runtime} started jobs of a paused topic: {started}"
    # The delayer server and the other drivers call scripts too; a worker
    # polling in a loop would make hundreds in 2 s.
    spent = calls() - before  # measured: 40-41 classic (the server's ticks), 1-5 per-topic
    assert spent < 60, f"{spent} script calls in 2 s while paused"
    assert harness.ok(stack.drivers, "php", {"op": "resume", "topic": topic})["changed"]
    w.wait_for(lambda evs: all(("acked", 1) in per_job(evs, j) for j in ids), "every held job's ack")
    assert w.term() == 0, harness.tail(w.log)
    events = w.snapshot()
    assert all(per_job(events, j) == [("started", 1), ("succeeded", 1), ("acked", 1)] for j in ids), events
