"""Every SDK operation is one script call (issue 21; PROTOCOL.md, "The
per-topic layout": the scripts announce, the server owns the index).

For each SDK (rust, python, php) and both layouts, each operation (push,
push_many, pop, bpop, reserve, breserve, ack, release, bury, touch, remove,
reschedule, the lookup, the dead-letter listing, requeue and purge) runs
through its driver under Redis MONITOR, and the commands that driver sent
during the call must be exactly one script call (EVALSHA, or after a
NOSCRIPT the script loaded and sent again: EVALSHA then SCRIPT LOAD and
EVALSHA, or EVALSHA then EVAL); bpop and breserve make one script call per
attempt, one first and one after each blocking wait (at most one here: on
a list that holds a job, the first call takes it; on an empty one, the
first finds nothing and the wait runs out). Connection upkeep (HELLO, AUTH, SELECT, CLIENT, PING,
READONLY) is not part of an operation and is left out; any other command
(an index write, a wake PUBLISH, a follow-up read or write) fails the pair.
Each script call must also have its script's one shape (issue 21): every
KEYS and ARGV its header lists, "" for a value not given
(test_conformance_contract.check_call), in both layouts.

Each layout runs on a stack of its own (a redis-server and the three
drivers, no delayer server: the test moves due jobs to their ready lists
itself, from its own connection, whose commands are left out), so the
MONITOR window holds the driver's commands alone; both layouts run in the
default (classic) session.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import PREFIX, Keys
from harness import Drivers, RedisServer, ok
from test_conformance_contract import RawMonitor, check_call

SDKS = ["rust", "python", "php"]
LAYOUTS = ["classic", "topic"]
OPS = ["push", "push_many", "reschedule", "job", "remove", "pop", "bpop", "reserve", "touch", "ack", "breserve",
       "release", "bury", "dead_list", "requeue_dead", "purge_dead", "bpop_empty", "breserve_empty"]
BLOCKING_OPS = {"bpop", "breserve", "bpop_empty", "breserve_empty"}

SCRIPT_CALLS = {"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"}
BLOCKING = {"BRPOP", "BLPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP"}
UPKEEP = {"HELLO", "AUTH", "SELECT", "CLIENT", "PING", "READONLY"}


def one_call(window: List[List[str]], blocking: bool) -> Optional[str]:
    """What is wrong with one operation's commands (``window``, upkeep left
    out): None when they are one script call (a NOSCRIPT's reload counted
    with it), or, when ``blocking``, at most one blocking wait and one
    script call per attempt: one first, and at most one after the wait."""
    cmds = [c for c in window if c[0].upper() not in UPKEEP]
    kept: List[List[str]] = []
    for c in cmds:
        name = c[0].upper()
        if name == "SCRIPT" and len(c) > 1 and c[1].upper() == "LOAD":
            # NOSCRIPT: the EVALSHA before it found nothing; the one after runs.
            if kept and kept[-1][0].upper() == "EVALSHA":
                kept.pop()
            continue
        if name == "EVAL" and kept and kept[-1][0].upper() == "EVALSHA" and len(c) > 1 \
                and hashlib.sha1(c[1].encode("latin-1")).hexdigest() == kept[-1][1].lower():
            kept.pop()  # NOSCRIPT answered by sending the script itself
        kept.append(c)
    scripts = [c for c in kept if c[0].upper() in SCRIPT_CALLS]
    waits = [c for c in kept if c[0].upper() in BLOCKING]
    others = [c for c in kept if c[0].upper() not in SCRIPT_CALLS | BLOCKING]
    problems = []
    order = [c[0].upper() in SCRIPT_CALLS for c in kept if c[0].upper() in SCRIPT_CALLS | BLOCKING]
    if not 1 <= len(scripts) <= (len(waits) + 1 if blocking else 1) or any(a and b for a, b in zip(order, order[1:])):
        problems.append(f"{len(scripts)} script calls for {len(waits)} waits")
    if len(waits) > (1 if blocking else 0):
        problems.append(f"{len(waits)} blocking waits")
    if others:
        problems.append(f"other commands: {[[a[:60] for a in c[:4]] for c in others]}")
    if not problems:
        return None
    # Each command cut short (a SCRIPT LOAD carries the whole script).
    return "; ".join(problems) + f" (sent: {[[a[:60] for a in c[:4]] for c in cmds]})"


class Stack:
    """One layout's redis-server, drivers and MONITOR."""

    def __init__(self, workdir: Path, layout: str) -> None:
        self.layout = layout
        self.redis = RedisServer(workdir)
        self.rds = self.redis.client()
        self.me = self.rds.client_info()["addr"]
        self.drivers = Drivers(self.redis, PREFIX, workdir, layout)
        self.keys = Keys(PREFIX, layout)
        self.monitor = RawMonitor(self.redis)

    def run(self, sdk: str, req: Dict[str, Any]) -> Tuple[Dict[str, Any], List[List[str]]]:
        """``req`` through ``sdk``'s driver: its answer and the commands the
        drivers sent meanwhile."""
        mon = self.monitor
        since = mon.mark(self.rds)
        answer = ok(self.drivers, sdk, req)
        until = mon.mark(self.rds)
        window = [c for addr, c in zip(mon.sources[since + 1 : until], mon.commands[since + 1 : until])
                  if addr != self.me]
        return answer, window

    def move_due(self, topic: str) -> None:
        """What the server does: the topic's waiting jobs to its ready list
        (due now or not: the test pushes with delay 0)."""
        pool = self.keys.pool_of(topic)
        ids = self.rds.zrange(pool, 0, -1)
        if ids:
            self.rds.zrem(pool, *ids)
            self.rds.lpush(self.keys.ready(topic), *ids)

    def close(self) -> None:
        self.monitor.close()
        self.drivers.stop_all()
        self.rds.close()
        self.redis.stop()


def drive(stack: Stack, sdk: str) -> Dict[str, Optional[str]]:
    """Every operation once through ``sdk``; per operation what was wrong
    (None: one call)."""
    topic = f"one-call-{sdk}-{uuid.uuid4().hex[:8]}"
    named = stack.keys.named(topic)
    found: Dict[str, Optional[str]] = {}

    def op(name: str, req: Dict[str, Any]) -> Dict[str, Any]:
        answer, window = stack.run(sdk, req)
        problems = [p for p in [one_call(window, name in BLOCKING_OPS)] if p]
        for c in window:
            if c[0].upper() in ("EVALSHA", "EVAL"):
                script, errors = check_call(c, stack.layout)
                problems += [f"{script}.lua: {e}" for e in errors]
        found[name] = "; ".join(problems) or None
        return answer

    def unchecked(req: Dict[str, Any]) -> Dict[str, Any]:
        return ok(stack.drivers, sdk, req)

    # Warm-up (connections, script caches): not an operation under test.
    unchecked({"op": "push", "topic": topic, "id": "warm", "delay_ms": 0, "body_b64": ""})
    unchecked({"op": "remove", "id": "warm", **named})
    op("push", {"op": "push", "topic": topic, "id": "a", "delay_ms": 0, "body_b64": "YQ=="})
    op("push_many", {"op": "push_many", "if_absent": False,
                     "jobs": [{"topic": topic, "id": i, "delay_ms": 0, "body_b64": ""} for i in "bcdef"]})
    op("reschedule", {"op": "reschedule", "id": "b", "delay_ms": 0, **named})
    op("job", {"op": "job", "topic": topic, "id": "a"})
    op("remove", {"op": "remove", "id": "c", **named})
    stack.move_due(topic)
    op("pop", {"op": "pop", "topic": topic})
    op("bpop", {"op": "bpop", "topic": topic, "timeout_ms": 2000})
    job = op("reserve", {"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
    assert job is not None, f"{sdk}: nothing to reserve"
    op("touch", {"op": "touch", "id": job["id"], "receipt": job["receipt"], "ttr_ms": 60_000, **named})
    op("ack", {"op": "ack", "id": job["id"], "receipt": job["receipt"], **named})
    job = op("breserve", {"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 2000})["job"]
    assert job is not None, f"{sdk}: nothing to breserve"
    op("release", {"op": "release", "id": job["id"], "receipt": job["receipt"], "delay_ms": 0, **named})
    last = unchecked({"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
    assert last is not None, f"{sdk}: nothing left to bury"
    op("bury", {"op": "bury", "id": last["id"], "receipt": last["receipt"], **named})
    op("dead_list", {"op": "dead_list", "topic": topic, "start": 0, "count": 10})
    op("requeue_dead", {"op": "requeue_dead", "topic": topic, "ids": [last["id"]]})
    # A dead letter to purge: the released job, reserved and buried again.
    stack.move_due(topic)
    again = unchecked({"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
    assert again is not None
    unchecked({"op": "bury", "id": again["id"], "receipt": again["receipt"], **named})
    op("purge_dead", {"op": "purge_dead", "topic": topic, "ids": None})
    # On an empty list: the first attempt finds nothing, the wait runs out.
    op("bpop_empty", {"op": "bpop", "topic": topic + "-empty", "timeout_ms": 300})
    op("breserve_empty", {"op": "breserve", "topic": topic + "-empty", "ttr_ms": 30_000, "timeout_ms": 300})
    return found


@pytest.fixture(scope="module", params=LAYOUTS)
def stack(request: Any, tmp_path_factory: Any) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp(f"one-call-{request.param}"), request.param)
    yield s
    s.close()


_RESULTS: Dict[Tuple[str, str], Dict[str, Optional[str]]] = {}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("sdk", SDKS)
def test_every_operation_is_one_script_call(stack: Stack, sdk: str, op: str) -> None:
    key = (stack.layout, sdk)
    if key not in _RESULTS:
        _RESULTS[key] = drive(stack, sdk)
    problem = _RESULTS[key].get(op, "not run")
    assert problem is None, f"{sdk} {op} ({stack.layout} layout): {problem}"


def test_the_check_counts_script_calls_and_waits() -> None:
    """The check itself: one call passes, a NOSCRIPT retry counts as one,
    an index write, a second script or a wait where none belongs fails."""
    sha = "0" * 40
    call = ["EVALSHA", sha, "1", "k"]
    assert one_call([call], False) is None
    assert one_call([["PING"], ["CLIENT", "SETINFO", "lib-name", "x"], call], False) is None
    assert one_call([call, ["SCRIPT", "LOAD", "..."], call], False) is None
    script = "return 1"
    evalsha = ["EVALSHA", hashlib.sha1(script.encode()).hexdigest(), "0"]
    assert one_call([evalsha, ["EVAL", script, "0"]], False) is None
    assert one_call([["BRPOP", "r", "1"], call], True) is None
    assert one_call([call, ["BRPOP", "r", "1"], call], True) is None
    assert one_call([call, ["BRPOP", "r", "1"]], True) is None
    assert one_call([call, call, ["BRPOP", "r", "1"]], True) is not None
    assert one_call([["BRPOP", "r", "1"], call], False) is not None
    assert one_call([call, ["ZADD", PREFIX + "due", "LT", "CH", "1", "t"]], False) is not None
    assert one_call([call, ["PUBLISH", PREFIX + "wake", "1"]], False) is not None
    assert one_call([call, call], False) is not None
    assert one_call([], False) is not None
