"""Every client operation, once, without I/O: the calls it sends to Redis and
what it makes of the replies.

An operation is a generator: it yields a step (:mod:`delayer._send`), is
sent Redis's reply, and returns its result; the sync and asyncio clients
only drive them, so they cannot drift apart. Every operation is one script
call per round trip (plus the wait of bpop and breserve), in both layouts.
The waits obey flow control without knowing it: a claim may answer "wait on
this key for at most this long" (:func:`delayer._replies.gate`).
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Tuple, TypeVar, Union

from . import _calls, _replies, _waits
from ._calls import ScriptCall
from ._rules import check_timeout
from ._send import Op, Pipeline, Wait
from .keys import Keys
from .models import DeadLetter, FlowState, Message, ReservedMessage, Taken

T = TypeVar("T")


def push(keys: Keys, topic: object, job_id: object, delay: object, body: object, ready_max_lifetime: object,
         max_attempts: object, backoff: object, if_absent: object, traceparent: object = None) -> Op[float]:
    call = _calls.push_call(keys, topic, job_id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent,
                            traceparent)
    return _replies.push(call, (yield call))


def push_many(keys: Keys, jobs: object, if_absent: object) -> Op[List[float]]:
    # Every job is checked before the first pipeline is sent.
    batches = _calls.push_many_batches(keys, jobs, if_absent)
    outcomes: List[Union[float, Taken]] = []
    for chunk in _calls.chunks(batches.calls):
        outcomes.extend(_replies.push_many_pipeline(chunk, (yield Pipeline(chunk))))
    ordered: List[Union[float, Taken]] = [0.0] * len(outcomes)
    for k, i in enumerate(batches.order):
        ordered[i] = outcomes[k]
    return _replies.push_many(ordered)


def pop(keys: Keys, topic: object) -> Op[Optional[Message]]:
    return _replies.message((yield _calls.pop_call(keys, topic)))


#: ``after=`` of a wait that has not claimed yet: it starts with the non-blocking claim.
CLAIM = object()


def _blocking(claim: ScriptCall, block: str, queue: str, claim_after: Callable[[object], Optional[ScriptCall]],
              decode: Callable[[object], Optional[T]], timeout: object, after: object) -> Op[Optional[T]]:
    """The one wait of bpop and breserve (design 23, §3.2): ``claim`` (the
    non-blocking script) first; nil -> ``block`` on the ready queue, then the
    claim ``claim_after`` makes of its reply (None: it timed out); a wait
    instruction -> block on its gate at most its recheck, then ``claim``
    again. ``after``: the outcome of a claim the caller just made (a Worker's
    fetch: None or a :class:`~delayer._replies.Gate`), so the wait does not make it twice."""
    deadline = _waits.deadline(check_timeout(timeout), time.monotonic())
    reply = (yield claim) if after is CLAIM else after
    while True:
        paused = reply if isinstance(reply, _replies.Gate) else _replies.gate(reply)
        if paused is None:
            job = decode(reply)
            if job is not None:
                return job
        wait = _waits.seconds(deadline, time.monotonic())
        if wait is None:
            return None
        if paused is not None:
            # The gate is absent while paused: this blocks until a resume writes it, or the recheck.
            woke = yield Wait("BRPOPLPUSH", paused.key, min(wait, paused.recheck))
            if woke is None and _waits.seconds(deadline, time.monotonic()) is None:
                return None  # no resume came and the time is up: no claim to make
            reply = yield claim
            continue
        again = claim_after((yield Wait(block, queue, wait)))
        # None: this wait is over; the deadline says whether to wait again.
        reply = None if again is None else (yield again)


def bpop(keys: Keys, topic: object, timeout: object, after: object = CLAIM) -> Op[Optional[Message]]:
    call = _calls.pop_call(keys, topic)
    t = str(topic)  # checked by pop_call

    def take(reply: object) -> Optional[ScriptCall]:
        # BRPOP took an id; take.lua hands it out (nil: another consumer's pop had it).
        job_id = _replies.brpop(reply)
        return None if job_id is None else _calls.take_call(keys, t, job_id)

    return (yield from _blocking(call, "BRPOP", call.keys[0], take, _replies.message, timeout, after))


def claim_pop(keys: Keys, topic: object) -> Op[Union[Message, _replies.Gate, None]]:
    """pop, for a Worker: the job, or the wait instruction of a paused topic."""
    reply = yield _calls.pop_call(keys, topic)
    return _replies.gate(reply) or _replies.message(reply)


def remove(keys: Keys, job_id: object, topic: object = None) -> Op[bool]:
    return _replies.flag((yield _calls.remove_call(keys, job_id, topic)), "remove.lua")


def reserve(keys: Keys, topic: object, ttr: object) -> Op[Optional[ReservedMessage]]:
    return _replies.reserved((yield _calls.reserve_call(keys, topic, ttr)))


def reserve_many(
    keys: Keys, topic: object, ttr: object, n: object, acks: object
) -> Op[Tuple[List[bool], List[ReservedMessage]]]:
    got = yield from fetch(keys, topic, ttr, n, acks)
    return got.acked, got.jobs


def fetch(keys: Keys, topic: object, ttr: object, n: object, acks: object) -> Op[_replies.Batch]:
    """reserve_many, for a Worker: also the wait instruction of a paused topic."""
    many = _calls.reserve_many_calls(keys, topic, ttr, n, acks)
    if not many.calls:
        return _replies.Batch([], [], None)
    replies = yield Pipeline(many.calls)
    results = [_replies.batch(reply, (len(call.args) - 4) // 2) for call, reply in zip(many.calls, replies)]
    first = results[0] if many.reserves else _replies.Batch([], [], None)
    return _replies.Batch([results[c].acked[k] for c, k in many.acks], first.jobs, first.paused)


def breserve(keys: Keys, topic: object, ttr: object, timeout: object,
             after: object = CLAIM) -> Op[Optional[ReservedMessage]]:
    call = _calls.reserve_call(keys, topic, ttr)

    def peeked(reply: object) -> Optional[ScriptCall]:
        # BLMOVE of the queue onto itself wakes when it holds an id and takes nothing: reserve.lua takes it.
        return call if _replies.blmove(reply) else None

    return (yield from _blocking(call, "BLMOVE", call.keys[0], peeked, _replies.reserved, timeout, after))


def ack(keys: Keys, job: object, receipt: object, topic: object = None) -> Op[bool]:
    return _replies.flag((yield _calls.ack_call(keys, job, receipt, topic)), "ack.lua")


def touch(keys: Keys, job: object, ttr: object, receipt: object, topic: object = None) -> Op[Optional[float]]:
    reply = yield _calls.touch_call(keys, job, ttr, receipt, topic)
    return _replies.optional_time(reply, "touch.lua", "deadline")


def release(
    keys: Keys, job: object, delay: object, receipt: object, error: object = None, topic: object = None
) -> Op[bool]:
    return _replies.ended((yield _calls.release_call(keys, job, delay, receipt, error, topic)))


def bury(keys: Keys, job: object, receipt: object, error: object = None, topic: object = None) -> Op[bool]:
    return _replies.ended((yield _calls.bury_call(keys, job, receipt, error, topic)))


def reschedule(keys: Keys, job_id: object, delay: object, topic: object = None) -> Op[Optional[float]]:
    reply = yield _calls.reschedule_call(keys, job_id, delay, topic)
    return _replies.optional_time(reply, "reschedule.lua", "due time")


def flow(keys: Keys, topic: object, action: str = "get", per_second: object = None,
         burst: object = None) -> Op[FlowState]:
    """One flow.lua (flow_topic.lua) call: read (``"get"``), pause, resume,
    limit or unlimit ``topic``. A limit the script refuses is its
    ``invalid argument`` error, :class:`~delayer.InvalidArgument` (:mod:`delayer._translate`)."""
    return _replies.flow((yield _calls.flow_call(keys, topic, action, per_second, burst)))


def pause(keys: Keys, topic: object) -> Op[bool]:
    return (yield from flow(keys, topic, "pause")).changed


def resume(keys: Keys, topic: object) -> Op[bool]:
    return (yield from flow(keys, topic, "resume")).changed


def is_paused(keys: Keys, topic: object) -> Op[bool]:
    return (yield from flow(keys, topic)).paused


def set_rate_limit(keys: Keys, topic: object, per_second: object, burst: object = None) -> Op[FlowState]:
    return (yield from flow(keys, topic, "limit", per_second, burst))


def clear_rate_limit(keys: Keys, topic: object) -> Op[bool]:
    return (yield from flow(keys, topic, "unlimit")).changed


def dead_letters(keys: Keys, topic: object, start: object, count: object) -> Op[List[DeadLetter]]:
    return _replies.dead_letters((yield _calls.dead_list_call(keys, topic, start, count)))


def dead_take(keys: Keys, action: str, topic: object, ids: object) -> Op[int]:
    # Every call handles at most DEAD_BATCH entries so that Redis is never
    # held for long; "all" repeats until a call takes fewer than asked.
    every, calls = _calls.dead_take_calls(keys, action, topic, ids)
    total = 0
    while every is not None:
        count, taken = _replies.dead_taken((yield every))
        total += count
        if taken < _calls.DEAD_BATCH:
            break
    for call in calls:
        total += _replies.dead_taken((yield call))[0]
    return total
