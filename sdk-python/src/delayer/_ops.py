"""Every client operation, once, without I/O: the steps it sends to Redis and
what it makes of the replies.

An operation is a generator: it yields a :data:`Step` (a script call, a
pipeline of script calls, or a blocking wait), is sent Redis's raw reply,
and returns the operation's result. The sync client (:mod:`delayer.client`)
and the asyncio client (:mod:`delayer.aio`) each drive them with a few lines
of their own I/O, so the two cannot drift apart: checks, key names, loops
(``bpop``, ``breserve``, dead-letter batches, pipelines) and reply parsing
live here.
"""

from __future__ import annotations

import time
from typing import Any, Generator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from . import _calls, _replies, _waits
from ._calls import ScriptCall
from ._rules import check_timeout
from .keys import Keys
from .models import DeadLetter, Message, ReservedMessage, Taken

T = TypeVar("T")


class Pipeline(NamedTuple):
    """Script calls sent in one round trip (not a transaction), after a SCRIPT
    LOAD of each script they use (a no-op unless Redis lost its script cache).

    The reply is a list: one per SCRIPT LOAD (:attr:`scripts`), then one per call.
    """

    calls: Sequence[ScriptCall]

    @property
    def scripts(self) -> List[str]:
        """The scripts the calls use, each once, in order of first use."""
        return list(dict.fromkeys(c.script for c in self.calls))


class Wait(NamedTuple):
    """A blocking wait for a ready queue, run on a waits' connection (:mod:`delayer._waits`).

    ``command`` is ``"BRPOP"`` (takes the id: bpop) or ``"BLMOVE"`` (moves it
    back in place: breserve, whose wait takes nothing). The reply is the
    command's.
    """

    command: str
    queue: str
    seconds: float


#: What an operation asks its client to do next.
Step = Union[ScriptCall, Pipeline, Wait]
#: An operation: yields steps, is sent their replies, returns its result.
Op = Generator[Step, Any, T]


def push(
    keys: Keys,
    topic: object,
    job_id: object,
    delay: object,
    body: object,
    ready_max_lifetime: object,
    max_attempts: object,
    backoff: object,
    if_absent: object,
) -> Op[float]:
    call = _calls.push_call(keys, topic, job_id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent)
    return _replies.push(call, (yield call))


def push_many(keys: Keys, jobs: object, if_absent: object) -> Op[List[float]]:
    # Every job is checked before the first pipeline is sent.
    calls = _calls.push_many_calls(keys, jobs, if_absent)
    outcomes: List[Union[float, Taken]] = []
    for chunk in _calls.chunks(calls):
        step = Pipeline(chunk)
        outcomes.extend(_replies.push_many_pipeline(chunk, (yield step), len(step.scripts)))
    return _replies.push_many(outcomes)


def pop(keys: Keys, topic: object) -> Op[Optional[Message]]:
    return _replies.message((yield _calls.pop_call(keys, topic)))


def bpop(keys: Keys, topic: object, timeout: object) -> Op[Optional[Message]]:
    queue = _calls.pop_call(keys, topic).keys[0]
    deadline = _waits.deadline(check_timeout(timeout), time.monotonic())
    while True:
        wait = _waits.seconds(deadline, time.monotonic())
        if wait is None:
            return None
        job_id = _replies.brpop((yield Wait("BRPOP", queue, wait)))
        if job_id is None:
            continue  # this wait is over; the deadline says whether to wait again
        # Another consumer's pop may have taken the job (nil): wait again.
        message = _replies.message((yield _calls.take_call(keys, job_id)))
        if message is not None:
            return message


def remove(keys: Keys, job_id: object) -> Op[bool]:
    return _replies.flag((yield _calls.remove_call(keys, job_id)), "remove.lua")


def reserve(keys: Keys, topic: object, ttr: object) -> Op[Optional[ReservedMessage]]:
    return _replies.reserved((yield _calls.reserve_call(keys, topic, ttr)))


def reserve_many(
    keys: Keys, topic: object, ttr: object, n: object, acks: object
) -> Op[Tuple[List[bool], List[ReservedMessage]]]:
    call = _calls.reserve_many_call(keys, topic, ttr, n, acks)
    return _replies.reserved_many((yield call), (len(call.args) - 3) // 2)


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


def ack(keys: Keys, job: object, receipt: object) -> Op[bool]:
    return _replies.flag((yield _calls.ack_call(keys, job, receipt)), "ack.lua")


def touch(keys: Keys, job: object, ttr: object, receipt: object) -> Op[Optional[float]]:
    return _replies.optional_time((yield _calls.touch_call(keys, job, ttr, receipt)), "touch.lua", "deadline")


def release(keys: Keys, job: object, delay: object, receipt: object, error: object = None) -> Op[bool]:
    return _replies.ended((yield _calls.release_call(keys, job, delay, receipt, error)))


def bury(keys: Keys, job: object, receipt: object, error: object = None) -> Op[bool]:
    return _replies.ended((yield _calls.bury_call(keys, job, receipt, error)))


def reschedule(keys: Keys, job_id: object, delay: object) -> Op[Optional[float]]:
    return _replies.optional_time((yield _calls.reschedule_call(keys, job_id, delay)), "reschedule.lua", "due time")


def dead_letters(keys: Keys, topic: object, start: object, count: object) -> Op[List[DeadLetter]]:
    return _replies.dead_letters((yield _calls.dead_list_call(keys, topic, start, count)))


def dead_take(keys: Keys, action: str, topic: object, ids: object) -> Op[int]:
    # Every call handles at most DEAD_BATCH entries so that Redis is never
    # held for long; "all" repeats until a call takes fewer than asked.
    every, calls = _calls.dead_take_calls(keys, action, topic, ids)
    total = 0
    while every is not None:
        done, taken = _replies.dead_taken((yield every))
        total += done
        if taken < _calls.DEAD_BATCH:
            break
    for call in calls:
        total += _replies.dead_taken((yield call))[0]
    return total
