"""Consumers obey a topic's flow hash (design 23 §3, slice 1), with the sync
client and the thread Worker, in both layouts: while the hash says ``paused``
nothing is handed out and the ready queue stays as it was; the waits block on
the topic's gate (no busy loop) and a resume wakes them at once. The pause
and resume are the client's ``pause`` and ``resume`` (flow.lua), but for one
test that writes the hash by hand (flowkit), as an operator could."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from delayer import Delayer, Message, ReservedMessage, Worker

from flowkit import P, blocked_in, calls, make_ready, names, pause, ready, wait_for, d, layout  # noqa: F401 (fixtures)
from workerkit import Recorder, Running

#: The scripts' recheck (PAUSED_RECHECK_MS): a resume must be seen well before it.
RECHECK = 5.0



def test_non_blocking_claims_give_nothing_while_paused(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    for i in range(4):
        d.push("t", f"j{i}", 0, f"body-{i}")
    make_ready(raw, layout, 4)
    held = d.reserve("t", 30)  # reserved before the pause: its ack must still pass
    assert held is not None and held.id == "j0"
    before = ready(raw, layout)
    assert len(before) == 3
    pause(raw, layout)  # by hand, as an operator could: the scripts read the field, whoever wrote it
    assert d.pop("t") is None
    assert d.reserve("t", 30) is None
    acked, jobs = d.reserve_many("t", 30, 5, [held])  # batch mode: acks pass, no jobs
    assert (acked, jobs) == ([True], [])
    assert d.reserve_many("t", 30, 5) == ([], [])
    assert ready(raw, layout) == before  # the same ids, in the same order
    assert raw.exists(*(f"{P}job_bucket:j{i}" if layout == "classic" else f"{P}{{t}}:job:j{i}"
                        for i in (1, 2, 3))) == 3
    raw.hdel(names(layout)["flow"], "paused")
    popped = d.pop("t")
    assert isinstance(popped, Message) and popped.id == "j1"
    got = d.reserve("t", 30)
    assert isinstance(got, ReservedMessage) and got.id == "j2"
    _, rest = d.reserve_many("t", 30, 5)
    assert [j.id for j in rest] == ["j3"]


def test_bpop_and_breserve_wait_across_a_pause(url: str, d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.push("t", "a", 0, "A")
    d.push("t", "b", 0, "B")
    # Ready before the pause: the per-topic server's move_topic.lua moves nothing of a paused topic.
    make_ready(raw, layout, 2)
    assert d.pause("t") is True
    with ThreadPoolExecutor(2) as pool, Delayer(url, P, layout=layout) as other:
        forever = pool.submit(d.bpop, "t", 0)  # 0 = forever: its gate waits are recheck slices
        bounded = pool.submit(other.breserve, "t", 30, 20)
        wait_for("both waits on the gate", lambda: blocked_in(raw, "brpoplpush") == 2)
        time.sleep(1.0)  # the point: a second with due jobs ready, and nothing handed out
        assert not forever.done() and not bounded.done()
        assert sorted(ready(raw, layout)) == [b"a", b"b"]
        start = time.monotonic()
        assert d.resume("t") is True  # on the client whose bpop waits: the waits have connections of their own
        got = [forever.result(timeout=RECHECK), bounded.result(timeout=RECHECK)]
        took = time.monotonic() - start
    assert took < 1.5, f"the resume was seen after {took:.2f} s"
    assert isinstance(got[0], Message) and isinstance(got[1], ReservedMessage)
    assert sorted(j.id for j in got) == ["a", "b"]  # type: ignore[union-attr]
    assert ready(raw, layout) == []


def test_a_paused_wait_makes_a_handful_of_calls(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    d.push("t", "a", 0)
    make_ready(raw, layout, 1)
    d.pause("t")
    raw.config_resetstat()
    start = time.monotonic()
    assert d.bpop("t", 2.5) is None  # the gate wait runs out with the time: one claim, one wait
    assert d.breserve("t", 30, 2.5) is None
    assert time.monotonic() - start >= 4.9
    made = calls(raw)
    # No BRPOP of the paused queue (no put-back window), no BLMOVE peek spinning on its ids.
    assert "brpop" not in made and "blmove" not in made, made
    assert made.get("evalsha", 0) <= 4 and made.get("brpoplpush", 0) <= 4, made
    assert ready(raw, layout) == [b"a"]


def test_a_bpop_blocked_when_the_pause_lands_puts_the_id_back(
    url: str, d: Delayer, raw: "redis.Redis", layout: str
) -> None:
    d.push("t", "a", 0, "A")
    d.push("t", "b", 0, "B")
    n = names(layout)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(d.bpop, "t", 20)
        wait_for("bpop blocked in BRPOP", lambda: blocked_in(raw, "brpop") == 1)
        with Delayer(url, P, layout=layout) as operator:
            assert operator.pause("t") is True
        # Both ids become ready at once, as move.lua would: "a" at the right end, where BRPOP takes.
        with raw.pipeline(transaction=True) as pipe:
            pipe.zrem(n["pool"], "a", "b")
            pipe.lpush(n["ready"], "a", "b")
            pipe.execute()
        wait_for("the wait to go to the gate", lambda: blocked_in(raw, "brpoplpush") == 1)
        assert ready(raw, layout) == [b"b", b"a"]  # put back where it was: nothing handed out, nothing lost
        assert not waiting.done()
        assert d.resume("t") is True
        got = waiting.result(timeout=RECHECK)
    assert isinstance(got, Message) and (got.id, got.body) == ("a", b"A")
    assert ready(raw, layout) == [b"b"]


@pytest.mark.parametrize("at_most_once", [False, True], ids=["reserve", "pop"])
def test_a_worker_on_a_paused_topic_waits_on_the_gate(
    url: str, d: Delayer, raw: "redis.Redis", layout: str, at_most_once: bool
) -> None:
    for i in range(6):
        d.push("t", f"j{i}", 0)
    make_ready(raw, layout, 6)  # by hand: no server thread, so every call counted is the Worker's
    d.pause("t")
    hooks = Recorder()
    seen = []
    lock = threading.Lock()
    with Delayer(url, P, layout=layout) as client:
        w = Worker(client, concurrency=4, at_most_once=at_most_once, hooks=hooks)

        @w.handler("t")
        def handle(job: object) -> None:
            with lock:
                seen.append(job.id)  # type: ignore[attr-defined]

        running = Running(w)
        try:
            wait_for("the worker on the gate", lambda: blocked_in(raw, "brpoplpush") == 1)
            raw.config_resetstat()
            time.sleep(3.0)  # the point: three seconds paused, no job started, few calls
            made = calls(raw)
            assert hooks.names("started") == [] and seen == []
            assert len(ready(raw, layout)) == 6
            assert "blmove" not in made and "brpop" not in made, made
            # One claim and one gate wait per idle round (IDLE_WAIT = 1 s): as an idle Worker today.
            assert made.get("evalsha", 0) <= 5 and made.get("brpoplpush", 0) <= 5, made
            d.resume("t")
            wait_for("every job run", lambda: len(seen) == 6, within=RECHECK)
            if not at_most_once:
                wait_for("every ack", lambda: len(hooks.names("acked")) == 6)
        finally:
            running.stop()
    assert sorted(seen) == [f"j{i}" for i in range(6)]  # each once
    assert ready(raw, layout) == []


# -- the wait's steps and the decoders, without Redis ---------------------------------------------

W = [b"paused", 5000, b"delayer:flow_gate:t"]


def test_the_wait_claims_first_then_blocks_where_the_claim_says() -> None:
    from delayer import Keys, _ops
    from delayer._calls import ScriptCall
    from delayer._send import Wait

    k = Keys(P)
    op = _ops.bpop(k, "t", 0)  # forever: a gate wait is one recheck slice
    step = next(op)
    assert isinstance(step, ScriptCall) and step.script == "pop"  # the non-blocking claim first
    step = op.send(W)
    assert step == Wait("BRPOPLPUSH", b"delayer:flow_gate:t", 5.0)
    step = op.send(None)  # the recheck slice ran out: claim again, not BRPOP
    assert isinstance(step, ScriptCall) and step.script == "pop"
    step = op.send(None)  # resumed, nothing ready: block on the ready queue as before
    assert isinstance(step, Wait) and (step.command, step.queue) == ("BRPOP", P + "ready_queue:t")
    step = op.send([b"q", b"a"])
    assert isinstance(step, ScriptCall) and step.script == "take" and step.args == ["a"]
    step = op.send(W)  # paused between BRPOP and take.lua (which put "a" back): to the gate
    assert isinstance(step, Wait) and step.command == "BRPOPLPUSH"
    step = op.send(b"1")  # woken by a resume
    assert isinstance(step, ScriptCall) and step.script == "pop"
    with pytest.raises(StopIteration) as done:
        op.send([b"a", b"t", b"A", b""])
    assert isinstance(done.value.value, Message) and done.value.value.id == "a"


def test_a_gate_wait_is_at_most_the_time_left() -> None:
    from delayer import Keys, _ops
    from delayer._send import Wait

    op = _ops.breserve(Keys(P, "topic"), "t", 30, 0.5)
    assert next(op).script == "reserve"
    step = op.send([b"paused", 5000, b"delayer:{t}:gate"])
    assert isinstance(step, Wait) and step.queue == b"delayer:{t}:gate" and 0.4 < step.seconds <= 0.5
    time.sleep(step.seconds)  # as long as Redis would block
    with pytest.raises(StopIteration) as done:
        op.send(None)  # timed out with the time: no claim after it
    assert done.value.value is None


def test_wait_instructions_are_decoded_in_one_place() -> None:
    from delayer import ProtocolError, _replies

    assert _replies.gate(W) == _replies.Gate(b"delayer:flow_gate:t", 5.0)
    assert _replies.gate([b"paused", 0, b"g"]) == _replies.Gate(b"g", 0.001)  # never 0: Redis's "forever"
    assert _replies.gate(None) is None and _replies.gate([b"a", b"t", b"b"]) is None
    assert _replies.message(W) is None and _replies.reserved(W) is None
    assert _replies.reserved_many([[1], [], W], 1) == ([True], [])
    assert _replies.batch([[], [], W], 0).paused == _replies.Gate(b"delayer:flow_gate:t", 5.0)
    for bad in ([b"paused", -1, b"g"], [b"paused", b"5000", b"g"], [b"paused", 5000, b""]):
        with pytest.raises(ProtocolError):
            _replies.gate(bad)
    with pytest.raises(ProtocolError):
        _replies.reserved_many([[], [], [b"x"]], 0)  # a third element that is no wait instruction


def test_a_flow_hash_of_the_wrong_type_fails_closed_naming_it(d: Delayer, raw: "redis.Redis", layout: str) -> None:
    from delayer import DelayerError

    d.push("t", "a", 0)
    make_ready(raw, layout, 1)
    flow = names(layout)["flow"]
    raw.set(flow, "paused")
    for call in (lambda: d.pop("t"), lambda: d.reserve("t", 30), lambda: d.reserve_many("t", 30, 5),
                 lambda: d.bpop("t", 1), lambda: d.breserve("t", 30, 1)):
        with pytest.raises(DelayerError, match=flow.replace("{", r"\{").replace("}", r"\}")):
            call()
    assert ready(raw, layout) == [b"a"]  # nothing handed out, nothing lost
    raw.delete(flow)
    got = d.pop("t")
    assert got is not None and got.id == "a"
