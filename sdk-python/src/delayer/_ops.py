"""Every client operation, once, without I/O: the calls it sends to Redis and
what it makes of the replies.

An operation is a generator: it yields a step (:mod:`delayer._send`), is
sent Redis's reply, and returns its result; the sync and asyncio clients
only drive them, so they cannot drift apart. Every operation is one script
call per round trip (plus the wait of bpop and breserve), in both layouts.
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple, Union

from . import _calls, _replies, _waits
from ._rules import check_timeout
from ._send import Op, Pipeline, Wait
from .keys import Keys
from .models import DeadLetter, Message, ReservedMessage, Taken


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


def bpop(keys: Keys, topic: object, timeout: object) -> Op[Optional[Message]]:
    queue = _calls.pop_call(keys, topic).keys[0]
    t = str(topic)  # checked by pop_call
    deadline = _waits.deadline(check_timeout(timeout), time.monotonic())
    while True:
        wait = _waits.seconds(deadline, time.monotonic())
        if wait is None:
            return None
        job_id = _replies.brpop((yield Wait("BRPOP", queue, wait)))
        if job_id is None:
            continue  # this wait is over; the deadline says whether to wait again
        # Another consumer's pop may have taken the job (nil): wait again.
        message = _replies.message((yield _calls.take_call(keys, t, job_id)))
        if message is not None:
            return message


def remove(keys: Keys, job_id: object, topic: object = None) -> Op[bool]:
    return _replies.flag((yield _calls.remove_call(keys, job_id, topic)), "remove.lua")


def reserve(keys: Keys, topic: object, ttr: object) -> Op[Optional[ReservedMessage]]:
    return _replies.reserved((yield _calls.reserve_call(keys, topic, ttr)))


def reserve_many(
    keys: Keys, topic: object, ttr: object, n: object, acks: object
) -> Op[Tuple[List[bool], List[ReservedMessage]]]:
    many = _calls.reserve_many_calls(keys, topic, ttr, n, acks)
    if not many.calls:
        return [], []
    replies = yield Pipeline(many.calls)
    results = [
        _replies.reserved_many(reply, (len(call.args) - 4) // 2) for call, reply in zip(many.calls, replies)
    ]
    jobs = results[0][1] if many.reserves else []
    return [results[c][0][k] for c, k in many.acks], jobs


def breserve(keys: Keys, topic: object, ttr: object, timeout: object) -> Op[Optional[ReservedMessage]]:
    call = _calls.reserve_call(keys, topic, ttr)
    queue = call.keys[0]
    deadline = _waits.deadline(check_timeout(timeout), time.monotonic())
    while True:
        wait = _waits.seconds(deadline, time.monotonic())
        if wait is None:
            return None
        # BLMOVE of the queue onto itself: wakes when it holds an id, takes nothing.
        if not _replies.blmove((yield Wait("BLMOVE", queue, wait))):
            continue
        job = _replies.reserved((yield call))
        if job is not None:
            return job


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
