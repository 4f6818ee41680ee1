"""Hostile input: every key and job field docs/PROTOCOL.md lists, broken in
every way a bad day or an attacker breaks it, against the real server, the
CLI and the three SDKs (issue 20, "Tests that keep it so").

The cases are made from the protocol's own tables (protocol_keys.py): each
key gets the wrong type, and by its type out-of-range scores (ZSET), entries
that are not UTF-8, huge or without a job (LIST, SET), bad counters
(STRING); each job field a missing, non-numeric, out-of-range or non-UTF-8
value; the wake channel junk messages. A key added to the tables gets them
too, and one the suite cannot drive fails loudly instead of going untested.

Each case, in both layouts, on a stack of its own (redis-server, the
``delayer`` server with metrics on, the rust, python and php drivers):
seeds a victim topic with jobs (due ones, a reserved one left to expire into
its dead letters, one without a topic), breaks the key, drives every reader
(another topic's push, move and pop; pop, bpop, reserve and lookup of the
victim topic by each SDK; ``delayer stats --json``), puts the key right
(as an operator would: the broken value deleted, what it held given back),
and drains the victim topic. It asserts:

- the server and every driver keep running, and nothing panics;
- another topic keeps moving (unless the key is one every topic shares and
  needs: the classic pool and reserved set, the per-topic index);
- the server's log names the key, when the server reads or writes it;
- nothing is delivered twice, and nothing deleted undelivered: every job
  the case pushed is delivered exactly once after the repair, or, where the
  case made it wait (a due time past year 9999, a reservation with no end),
  still waits where it was.
"""

from __future__ import annotations

import base64
import collections
import itertools
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

import pytest
import redis

import harness
import protocol_keys
from protocol_keys import KeySpec

PREFIX = "hostile:"
SDKS = ["rust", "python", "php"]
#: The server ticks at least this often (ms).
TIMER_INTERVAL_MS = 100
#: How long a job may take to be moved and popped once nothing holds it; the
#: per-topic index's sweep, the slowest repair, runs every 10 s.
SETTLE_S = 16.0
HUGE = 1 << 20
_numbers = itertools.count()


@dataclass
class Stack:
    """One layout's processes; shared by that layout's cases."""

    layout: str
    redis_server: harness.RedisServer
    server: harness.DelayerServer
    drivers: harness.Drivers
    rds: "redis.Redis"
    server_extra: str

    def log_size(self) -> int:
        return self.server.log.stat().st_size

    def log_since(self, offset: int) -> str:
        with open(self.server.log, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def restart_if_dead(self) -> None:
        """A case that killed the server has failed; the next starts on a new
        one, so each case's own result shows."""
        if self.server.proc is None or self.server.proc.poll() is not None:
            workdir = self.server.dir.parent
            self.server.stop()
            self.server = harness.DelayerServer(workdir, self.redis_server, PREFIX, TIMER_INTERVAL_MS, self.layout,
                                                extra=self.server_extra)

    def alive(self) -> None:
        assert self.server.proc is not None and self.server.proc.poll() is None, (
            f"the server exited: {harness.tail(self.server.log)}")

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.server.exe), "-c", str(self.server.conf), *args],
                              capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def stack(request: Any, tmp_path_factory: Any) -> Iterator[Stack]:
    layout = request.param
    d: Path = tmp_path_factory.mktemp(f"hostile-{layout}")
    redis_server = harness.RedisServer(d)
    server = None
    drivers = harness.Drivers(redis_server, PREFIX, d, layout)
    try:
        extra = f"metrics_addr = 127.0.0.1:{harness.free_port()}\n"
        server = harness.DelayerServer(d, redis_server, PREFIX, TIMER_INTERVAL_MS, layout, extra=extra)
        stack = Stack(layout, redis_server, server, drivers, redis_server.client(), extra)
        yield stack
        server = stack.server
    finally:
        drivers.stop_all()
        if server is not None:
            server.stop()
        redis_server.stop()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def id_of(job: Dict[str, Any]) -> bytes:
    """A handed-out job's id, as bytes: ``id`` for UTF-8, ``id_b64`` for
    the rest (the drivers' line protocol, conformance/README.md)."""
    if "id_b64" in job and job["id_b64"] is not None:
        return base64.b64decode(job["id_b64"])
    return str(job["id"]).encode("utf-8", "surrogateescape")


@dataclass
class Case:
    """One attack's victim topic, its jobs and what became of them."""

    stack: Stack
    spec: KeySpec
    n: int = field(default_factory=lambda: next(_numbers))
    #: Jobs that must be delivered exactly once by the end.
    tracked: Set[bytes] = field(default_factory=set)
    #: Jobs that must still wait where they are at the end (key -> ids).
    held: Dict[bytes, Set[bytes]] = field(default_factory=dict)
    #: Jobs that must not be lost: delivered, or their bucket still there.
    kept: Set[bytes] = field(default_factory=set)
    #: Pop deliveries, per id.
    popped: "collections.Counter[bytes]" = field(default_factory=collections.Counter)
    #: Whether another topic must keep moving while the key is broken.
    others_move: bool = True
    saved: Optional[str] = None
    #: What the repair runs besides putting a wrong type right.
    undo: List[Callable[[], Any]] = field(default_factory=list)

    @property
    def victim(self) -> str:
        return f"v{self.n}"

    @property
    def layout(self) -> str:
        return self.stack.layout

    @property
    def rds(self) -> "redis.Redis":
        return self.stack.rds

    def job_id(self, k: int) -> str:
        return f"v{self.n}:{k}"

    @property
    def key(self) -> str:
        """The attacked key: of the victim topic, or of its first job."""
        return self.spec.name(PREFIX, self.victim, self.job_id(1))

    def bucket(self, job_id: bytes, topic: Optional[str] = None) -> bytes:
        t = (topic or self.victim).encode()
        if self.layout == "topic":
            return PREFIX.encode() + b"{" + t + b"}:job:" + job_id
        return PREFIX.encode() + b"job_bucket:" + job_id

    def pool(self) -> str:
        return f"{PREFIX}{{{self.victim}}}:pool" if self.layout == "topic" else PREFIX + "job_pool"

    def ready(self) -> str:
        return f"{PREFIX}{{{self.victim}}}:ready" if self.layout == "topic" else f"{PREFIX}ready_queue:{self.victim}"

    def named(self) -> Dict[str, str]:
        return {"topic": self.victim} if self.layout == "topic" else {}

    def push(self, k: int, delay_ms: int, **opts: Any) -> bytes:
        job_id = self.job_id(k)
        harness.ok(self.stack.drivers, "python", {"op": "push", "topic": self.victim, "id": job_id,
                                                   "delay_ms": delay_ms, "body_b64": b64(b"victim"), **opts})
        return job_id.encode()

    # -- seeding -----------------------------------------------------------

    def seed(self) -> None:
        """Victims: two jobs due soon (tracked), and one reserved and left to
        expire into its dead letters (kept)."""
        self.tracked |= {self.push(1, 300), self.push(2, 300)}
        expiring = self.push(3, 0, max_attempts=1)
        assert harness.wait_until(lambda: self.lookup("python", expiring)["state"] == "ready", 10)
        job = harness.ok(self.stack.drivers, "python", {"op": "reserve", "topic": self.victim, "ttr_ms": 400})["job"]
        assert job is not None and id_of(job) == expiring
        self.kept.add(expiring)

    def seed_stray(self) -> None:
        """One job without a topic, due at once (kept: parked on the malformed
        list, never delivered); after the attack, so the server meets it
        then. Not where the attack broke the pool or the bucket itself."""
        stray = f"v{self.n}:stray".encode()
        try:
            self.rds.hset(self.bucket(stray), mapping={"body": "no topic"})
            self.rds.zadd(self.pool(), {stray: 0})
        except redis.ResponseError:  # a wrong-typed pool: nowhere to put it
            return
        self.kept.add(stray)

    def lookup(self, sdk: str, job_id: bytes) -> Dict[str, Any]:
        job: Dict[str, Any] = harness.ok(self.stack.drivers, sdk, {"op": "job", "topic": self.victim,
                                                                   "id": job_id.decode()})["job"]
        return job

    # -- breaking and mending ---------------------------------------------

    def set_aside(self) -> None:
        """Keeps what the key holds under another name of the same slot, so
        the repair can give it back as an operator restoring it would."""
        if self.rds.exists(self.key):
            self.saved = self.key + ":hostile-saved"
            self.rds.rename(self.key, self.saved)

    def wrong_type(self) -> None:
        self.set_aside()
        if self.spec.type == "string":
            self.rds.rpush(self.key, "hostile")
        else:
            self.rds.set(self.key, "hostile")

    def repair(self) -> None:
        """Puts a wrong-typed key right: the broken value deleted, what the
        key held given back. Other attacks leave data an operator would not
        touch (a far due time is the job's own), or that the suite must see
        handled (a junk entry, a bad counter's field)."""
        if self.saved is not None or self.rds.type(self.key) != self.spec.type.encode():
            self.rds.delete(self.key)
        if self.saved is not None:
            self.rds.rename(self.saved, self.key)
        for step in self.undo:
            step()

    # -- driving every reader ---------------------------------------------

    def drive(self) -> None:
        """Another topic's job must move and pop; every SDK must answer the
        victim topic's pop, bpop, reserve and lookup (a result or an error,
        never a crash); the CLI's stats must not crash."""
        drivers = self.stack.drivers
        if self.others_move:
            other, job_id = f"o{self.n}", f"o{self.n}:1"
            harness.ok(drivers, "rust", {"op": "push", "topic": other, "id": job_id, "delay_ms": 0,
                                         "body_b64": b64(b"other")})
            got = harness.ok(drivers, "php", {"op": "bpop", "topic": other, "timeout_ms": 10_000})["job"]
            assert got is not None and id_of(got) == job_id.encode(), f"another topic stopped moving: {got}"
        for sdk in SDKS:
            for req in ({"op": "pop", "topic": self.victim},
                        {"op": "bpop", "topic": self.victim, "timeout_ms": 50},
                        {"op": "reserve", "topic": self.victim, "ttr_ms": 60_000},
                        {"op": "job", "topic": self.victim, "id": self.job_id(1)},
                        {"op": "dead_list", "topic": self.victim, "start": 0, "count": 10}):
                r = drivers[sdk].request(req, timeout=30)
                if r["ok"] and req["op"] in ("pop", "bpop") and r["job"] is not None:
                    self.popped[id_of(r["job"])] += 1
                if r["ok"] and req["op"] == "reserve" and r["job"] is not None:
                    # Handed out at least once: ack it, so it counts as done.
                    job = r["job"]
                    done = drivers[sdk].request({"op": "ack", "id": job["id"], "receipt": job["receipt"],
                                                 **self.named()})
                    if done.get("ok") and done.get("done"):
                        self.popped[id_of(job)] += 1
                if not r["ok"]:
                    assert r["error"].split(":")[0] in ("connection", "other", "invalid_argument"), r
        stats = self.stack.cli("stats", "--json")
        assert stats.returncode in (0, 1), f"delayer stats: exit {stats.returncode}: {stats.stderr[-2000:]!r}"
        assert b"panicked" not in stats.stderr, stats.stderr[-2000:]

    # -- the end -----------------------------------------------------------

    def settle(self) -> None:
        """Drains the victim topic with each SDK in turn until every tracked
        job came out; then checks what was held and kept."""
        end = time.monotonic() + SETTLE_S
        sdks = itertools.cycle(SDKS)
        while not self.tracked <= set(self.popped) and time.monotonic() < end:
            r = harness.ok(self.stack.drivers, next(sdks), {"op": "bpop", "topic": self.victim,
                                                             "timeout_ms": 300})
            if r["job"] is not None:
                self.popped[id_of(r["job"])] += 1
        twice = {i: n for i, n in self.popped.items() if n > 1}
        assert not twice, f"delivered more than once: {twice}"
        # A job a blocking pop took off its queue while a key it needs was
        # broken is parked on the malformed list, its bucket kept: not lost,
        # left for an operator (PROTOCOL.md, "The guard rule").
        missing = {i for i in self.tracked - set(self.popped) if not self.parked(i)}
        assert not missing, f"never delivered: {sorted(missing)} (log: {self.stack.log_since(0)[-3000:]})"
        for key, ids in self.held.items():
            for job_id in ids:
                assert self.still_in(key, job_id), f"{job_id!r} left {key!r} undelivered"
        for job_id in self.kept - set(self.popped):
            assert self.rds.exists(self.bucket(job_id)), f"{job_id!r} was deleted undelivered"

    def parked(self, job_id: bytes) -> bool:
        malformed = f"{PREFIX}{{{self.victim}}}:malformed" if self.layout == "topic" else PREFIX + "malformed"
        return self.still_in(malformed.encode(), job_id) and bool(self.rds.exists(self.bucket(job_id)))

    def still_in(self, key: bytes, job_id: bytes) -> bool:
        kind = self.rds.type(key)
        if kind == b"zset":
            return self.rds.zscore(key, job_id) is not None
        if kind == b"list":
            return job_id in self.rds.lrange(key, 0, -1)
        return False


# -- the attacks, by the key's type -----------------------------------------


@dataclass(frozen=True)
class Attack:
    spec: KeySpec
    what: str
    run: Callable[[Case], None]

    @property
    def name(self) -> str:
        return f"{self.spec.layout}:{self.spec.kind}:{self.what}"


#: Scores that are no time at all, or none Redis's clock will reach.
FAR = ["inf", "1e20", "1e300"]
SCORES = FAR + ["-inf", "-1"]
#: Keys every topic shares and needs: while one is broken, nothing moves.
SHARED_NEEDS = {("classic", "job_pool"), ("classic", "reserved"), ("topic", "due")}
NOT_NUMBERS = ["abc", "1e300", "-5", "18446744073709551616", "inf", ""]


def wrong_type(case: Case) -> None:
    case.wrong_type()
    if case.spec.kind == "flow_pool:":
        # Only a listed topic's flow pool is written: list the victim.
        case.rds.sadd(PREFIX + "flow_topics", case.victim)
    if case.spec.kind in ("job_bucket:", "job:"):
        # The test replaced job 1's bucket: its data is gone, its id must not be.
        case.tracked.discard(case.job_id(1).encode())


def score(value: str) -> Callable[[Case], None]:
    def run(case: Case) -> None:
        far = value in FAR
        kind = case.spec.kind
        if kind in ("job_pool", "pool"):
            job_id = case.push(9, 60_000)
            case.rds.zadd(case.key, {job_id: value}, xx=True)
            (case.held.setdefault(case.key.encode(), set()).add(job_id) if far else case.tracked.add(job_id))
        elif kind == "reserved":
            job_id = case.push(9, 0)
            assert harness.wait_until(lambda: case.lookup("rust", job_id)["state"] == "ready", 10)
            job = harness.ok(case.stack.drivers, "rust", {"op": "reserve", "topic": case.victim,
                                                          "ttr_ms": 60_000})["job"]
            assert job is not None and id_of(job) == job_id
            case.rds.zadd(case.key, {job_id: value}, xx=True)
            if far:
                case.held.setdefault(case.key.encode(), set()).add(job_id)
            else:
                case.kept.add(job_id)  # expired at once: retried, so handed out again later
        elif kind == "due":
            # The seed's announcements reach the index at the server's next
            # tick and would lower the entry written here: a probe announced
            # after them and moved (so applied) first makes them all applied.
            probe, probe_id = f"b{case.n}", f"b{case.n}:1"
            harness.ok(case.stack.drivers, "rust", {"op": "push", "topic": probe, "id": probe_id, "delay_ms": 0,
                                                    "body_b64": b64(b"probe")})
            got = harness.ok(case.stack.drivers, "python", {"op": "bpop", "topic": probe, "timeout_ms": 10_000})["job"]
            assert got is not None and id_of(got) == probe_id.encode(), f"the probe never moved: {got}"
            case.rds.zadd(case.key, {case.victim: value})
        elif kind == "flow_pool:":
            # A job set aside (as the mover does for a paused topic) with a
            # due time that is no time: the drain of its now running topic
            # makes a past one ready and never a far one (nothing is early).
            job_id = case.push(9, 60_000)
            case.rds.zrem(case.pool(), job_id)
            case.rds.zadd(case.key, {job_id: value})
            case.rds.sadd(PREFIX + "flow_topics", case.victim)
            (case.held.setdefault(case.key.encode(), set()).add(job_id) if far else case.tracked.add(job_id))
        elif kind == "history":
            # A sample whose score is no time: the dashboard's history skips it.
            case.rds.zadd(case.key, {'{"t": 0, "by": {"x": [1, 0, 0, 0]}}': value})
        else:
            pytest.fail(f"no score attack for {case.spec.pattern}: add one to test_hostile_input.py")
    return run


def entry(what: str) -> Callable[[Case], None]:
    """An entry of a LIST or SET that is not UTF-8, huge, or names no job."""
    def run(case: Case) -> None:
        kind = case.spec.kind
        job_id = {"not_utf8": b"\xff\xfe-" + str(case.n).encode(), "huge": b"h" * HUGE,
                  "no_job": f"v{case.n}:ghost".encode()}[what]
        if what != "no_job":
            case.rds.hset(case.bucket(job_id), mapping={"topic": case.victim, "body": "odd"})
        if kind in ("ready_queue:", "ready"):
            case.rds.lpush(case.key, job_id)
            if what != "no_job":
                case.tracked.add(job_id)
        elif kind in ("dead:", "dead", "malformed"):
            if what != "no_job":
                case.rds.hset(case.bucket(job_id), mapping={"dead_reason": "buried", "dead_at": "1.000"})
            case.rds.lpush(case.key, job_id)
            case.held.setdefault(case.key.encode(), set()).add(job_id)
        elif kind in ("topics", "flow_topics"):
            case.rds.sadd(case.key, job_id)  # a topic name, here
        elif kind in ("flow_gate:", "gate"):
            # Read only while the topic is paused, and deleted then: junk
            # wakes a waiter, which asks again.
            case.rds.lpush(case.key, job_id)
        else:
            pytest.fail(f"no entry attack for {case.spec.pattern}: add one to test_hostile_input.py")
    return run


def counter(value: str) -> Callable[[Case], None]:
    """A counter that is no number; given back afterwards (a receipt counter
    set back would hand out receipts twice)."""
    def run(case: Case) -> None:
        if case.spec.kind == "scheduled_count":
            case.rds.hset(case.key, case.victim, value)
            case.undo.append(lambda: case.rds.hdel(case.key, case.victim))
        elif case.spec.kind == "outcomes":
            field = f"acked:{case.victim}"  # the next ack's HINCRBY meets it
            case.rds.hset(case.key, field, value)
            case.undo.append(lambda: case.rds.hdel(case.key, field))
        else:
            before = case.rds.get(case.key)
            case.rds.set(case.key, value)
            case.undo.append(lambda: case.rds.set(case.key, before) if before else case.rds.delete(case.key))
    return run


def message(case: Case) -> None:
    for junk in ["inf", "-inf", "nan", "1e300", "-1", "abc", "", "9" * 400, "x" * HUGE]:
        case.rds.publish(case.key, junk)


def bad_field(name: str, value: bytes, required: bool) -> Callable[[Case], None]:
    def run(case: Case) -> None:
        job_id = case.job_id(1).encode()
        bucket = case.bucket(job_id)
        if value == b"<missing>":
            case.rds.hdel(bucket, name)
        else:
            case.rds.hset(bucket, name, value)
        # Whatever the field says, the job is not to be lost.
        case.tracked.discard(job_id)
        case.kept.add(job_id)
    return run


def paused_as(value: bytes) -> Callable[[Case], None]:
    """A flow hash whose `paused` is junk: the topic is paused whatever the
    value says (nothing of it handed out meanwhile), until the operator
    deletes the field; then every job is delivered once."""
    def run(case: Case) -> None:
        case.rds.hset(case.key, "paused", value)
        case.undo.append(lambda: case.rds.hdel(case.key, "paused"))
    return run


def attacks() -> List[Attack]:
    out: List[Attack] = []
    for layout in ("classic", "topic"):
        for spec in protocol_keys.keys(layout):
            if spec.type == "channel":
                out.append(Attack(spec, "junk_messages", message))
                continue
            out.append(Attack(spec, "wrong_type", wrong_type))
            if spec.kind in ("flow:", "flow"):
                out += [Attack(spec, f"paused={v[:20].decode(errors='replace')}", paused_as(v))
                        for v in (b"\xff\xfe", b"x" * HUGE, b"")]
            elif spec.type == "zset":
                out += [Attack(spec, f"score={v}", score(v)) for v in SCORES]
            elif spec.type in ("list", "set"):
                out += [Attack(spec, f"entry={w}", entry(w)) for w in ("not_utf8", "huge", "no_job")]
            elif spec.type == "string" or spec.kind in ("scheduled_count", "outcomes"):
                out += [Attack(spec, f"value={v or 'empty'}", counter(v)) for v in NOT_NUMBERS[:3]]
            elif spec.type == "hash":
                numeric = itertools.count()
                for f in protocol_keys.fields():
                    values = [b"<missing>"] if f.required else []
                    if f.numeric:  # three of the bad numbers each, every one met by some field
                        i = next(numeric) * 3
                        values += [NOT_NUMBERS[(i + k) % len(NOT_NUMBERS)].encode() for k in range(3)]
                    else:
                        values += [b"\xff\xfe", b"x" * HUGE]
                    out += [Attack(spec, f"field={f.name}:{v[:20].decode(errors='replace')}",
                                   bad_field(f.name, v, f.required)) for v in values]
    return out


ATTACKS = attacks()


def test_every_key_of_the_protocol_is_attacked() -> None:
    """The tables are read: a key or field dropped from them (or a table the
    parser no longer finds) would silently shrink the suite."""
    kinds = {(a.spec.layout, a.spec.kind) for a in ATTACKS}
    for must in [("classic", "job_pool"), ("classic", "job_bucket:"), ("classic", "ready_queue:"),
                 ("classic", "wake"), ("topic", "pool"), ("topic", "due"), ("topic", "job:")]:
        assert must in kinds
    assert {f.name for f in protocol_keys.fields()} >= {"topic", "body", "attempts", "max_attempts"}


#: Keys the server touches, but not in what a case drives: it reads a job of
#: the per-topic layout only when the job's reservation expires, and parks on
#: a topic's malformed list only an expired reservation without a topic.
UNDRIVEN = {("topic", "job:"), ("topic", "malformed")}


def names_in_log(attack: Attack) -> bool:
    """Whether the server must name the attacked key in its log: it touches
    the key, and the value is broken (a wrong type), or says a time Redis's
    clock will never reach."""
    if not attack.spec.server_touches or (attack.spec.layout, attack.spec.kind) in UNDRIVEN:
        return False
    return attack.what == "wrong_type" or attack.what.split("=")[-1] in FAR


@pytest.mark.parametrize("stack,attack", [(a.spec.layout, a) for a in ATTACKS],
                         ids=[a.name for a in ATTACKS], indirect=["stack"])
def test_hostile(stack: Stack, attack: Attack) -> None:
    stack.restart_if_dead()
    case = Case(stack, attack.spec)
    case.others_move = (stack.layout, attack.spec.kind) not in SHARED_NEEDS or attack.what != "wrong_type"
    log_from = stack.log_size()
    case.seed()
    attack.run(case)
    case.seed_stray()
    try:
        case.drive()
        stack.alive()
        if names_in_log(attack):
            # A job's own key is named by the job's id (the log lists the
            # ids it parked or held); every other key by its name.
            names = [case.key] + ([case.job_id(1)] if "<id>" in attack.spec.pattern else [])
            assert harness.wait_until(lambda: any(n in stack.log_since(log_from) for n in names), SETTLE_S), (
                f"the server's log never named {names}: {stack.log_since(log_from)[-3000:]}")
    finally:
        case.repair()
    case.settle()
    stack.alive()
    log = stack.log_since(log_from)
    assert "panicked" not in log, log[-3000:]
    for sdk in SDKS:
        assert stack.drivers[sdk].request({"op": "pop", "topic": "nothing-here"})["ok"], f"{sdk} driver broke"
