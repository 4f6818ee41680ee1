"""Every client operation, once, without I/O: the steps it sends to Redis and
what it makes of the replies.

An operation is a generator: it yields a :data:`Step` (a script call, a
pipeline of script calls, plain commands, or a blocking wait), is sent
Redis's raw reply,
and returns the operation's result. The sync client (:mod:`delayer.client`)
and the asyncio client (:mod:`delayer.aio`) each drive them with a few lines
of their own I/O, so the two cannot drift apart: checks, key names, loops
(``bpop``, ``breserve``, dead-letter batches, pipelines), the per-topic
layout's index write and reply parsing live here.

The per-topic layout's index is a hint the server repairs (its sweep reads
every topic's pool head within about 10 s): an index command Redis refuses
(a key of another type, a full Redis, an ACL) does not fail the operation
whose script ran. :func:`heard` is the one place that decides it, and warns
once per key and command. A lost connection still raises, as before: whether
the script ran is then unknown.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, Generator, List, NamedTuple, Optional, Sequence, Set, Tuple, TypeVar, Union

from redis.exceptions import NoScriptError, ResponseError

from . import _calls, _replies, _waits, scripts
from ._send import Commands, Early, Op, Pipeline, Wait
from ._calls import Arg, ScriptCall
from ._rules import check_timeout
from .keys import Keys
from .errors import ProtocolError
from .models import DeadLetter, Message, ReservedMessage, Taken

T = TypeVar("T")

_log = logging.getLogger("delayer")


def _earlier(times: Dict[str, str], topic: str, text: str) -> None:
    """Keep in ``times`` the earlier of ``topic``'s time there and ``text``."""
    if topic not in times or float(text) < float(times[topic]):
        times[topic] = text


def index(keys: Keys, times: Dict[str, str], pushed: bool = False) -> Op[None]:
    """The per-topic layout's index write (PROTOCOL.md, "Operations in the
    per-topic layout"): after a call that schedules or reserves, lower each
    topic's ``<prefix>due`` entry to ``times[topic]`` (``"s.mmm"`` as a script
    answered it, or ``"0"``), add pushed topics to ``<prefix>topics``, and
    publish the time on ``<prefix>wake`` for each topic whose entry it lowered.
    Nothing in the classic layout, whose scripts do all of this themselves.
    A command Redis refuses is :func:`heard`, never the operation's error.
    """
    if not keys.per_topic or not times:
        return
    commands: List[Tuple[Arg, ...]] = []
    for topic, time_text in times.items():
        commands.append(("ZADD", keys.due, "LT", "CH", time_text, topic))
        if pushed:
            commands.append(("SADD", keys.topics, topic))
    replies = yield Commands(commands, tolerate=True)
    step = 2 if pushed else 1
    if not isinstance(replies, (list, tuple)) or len(replies) != len(commands):
        raise ProtocolError(f"expected {len(commands)} replies to the index write, got {replies!r:.200}")
    heard_ = [heard(c, r) for c, r in zip(commands, replies)]
    lowered = [t for t, reply in zip(times.values(), heard_[::step]) if _lowered(reply)]
    if lowered:
        yield from _wake(keys, lowered)


def _wake(keys: Keys, times: List[str]) -> Op[None]:
    """Publish each of ``times`` on ``<prefix>wake``: only a wake-up, as
    push.lua's pcall'd PUBLISH (an ACL user without the channel still
    pushes; the server finds the job by its index all the same)."""
    commands: List[Tuple[Arg, ...]] = [("PUBLISH", keys.wake, t) for t in times]
    replies = yield Commands(commands, tolerate=True)
    for command, reply in zip(commands, replies if isinstance(replies, (list, tuple)) else []):
        heard(command, reply)


def _lowered(zadd: object) -> bool:
    """Whether ZADD LT CH (its reply, or None: refused) lowered the entry."""
    return zadd is not None and _replies.flag(zadd, "ZADD")


#: The (key, command) pairs already warned about: three keys per prefix.
_warned: Set[Tuple[str, str]] = set()


def heard(command: Sequence[Arg], reply: object) -> object:
    """An index command's reply, or None when Redis refused it (an error
    reply): then, once per key and command in this process, a warning
    naming the key. The one place that decides a refused index write is not
    the operation's error: its script ran, and the server's sweep repairs
    the index."""
    if not isinstance(reply, ResponseError):
        return reply
    seen = (_text(command[1]), _text(command[0]))
    if seen not in _warned:
        _warned.add(seen)
        _log.warning("the index write %s %r failed (%s); the call went on, and the server's sweep repairs the "
                     "index within about 10 s (further failures of it not logged)", seen[1], seen[0], reply)
    return None


def _text(arg: Arg) -> str:
    return arg.decode("utf-8", "backslashreplace") if isinstance(arg, bytes) else str(arg)


#: How much earlier than its due time (ms) a per-topic push's early index
#: write is: the client's and Redis's clocks may disagree by this much before
#: a push costs a second round trip.
CLOCK_MARGIN_MS = 100
#: What a per-topic push still tells the index once push.lua answered (:func:`follow_up`).
WRITE = "write"
WAKE = "wake"


def estimate(now: float, delay_ms: int) -> str:
    """The early index write's time for a push of ``delay_ms`` at ``now``
    (Unix seconds, this machine's clock): :data:`CLOCK_MARGIN_MS` before the
    due time, as ``"s.mmm"`` like the scripts' times."""
    ms = int(now * 1000) + delay_ms - CLOCK_MARGIN_MS
    return f"{ms // 1000}.{ms % 1000:03d}"


def _ms(text: str) -> int:
    return round(float(text) * 1000)


def follow_up(early: str, answered: str, lowered: bool, resent: bool) -> Optional[str]:
    """What a per-topic push does after its pipeline, given the early index
    time it sent, the due time push.lua answered, whether the early ZADD
    lowered the index, and whether the pipeline was sent again after
    ``NOSCRIPT``: :data:`WRITE` (the estimate came out later than the due
    time, the clocks disagree: today's index write with the answered time),
    :data:`WAKE` (publish the answered time: the index was lowered, or may
    have been by the first sending), or None."""
    if _ms(early) > _ms(answered):
        return WRITE
    if lowered or resent:
        return WAKE
    return None


def _early_replies(step: Early, replies: object) -> List[Any]:
    """The replies of an :class:`Early` step: the script's (an error reply
    raised), then the index commands' (:func:`heard`)."""
    if not isinstance(replies, (list, tuple)) or len(replies) != 1 + len(step.commands):
        raise ProtocolError(f"expected {1 + len(step.commands)} replies to a push and its index write, "
                            f"got {replies!r:.200}")
    if isinstance(replies[0], BaseException):
        raise replies[0]
    return [replies[0], *(heard(c, r) for c, r in zip(step.commands, replies[1:]))]


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
    traceparent: object = None,
) -> Op[float]:
    call = _calls.push_call(
        keys, topic, job_id, delay, body, ready_max_lifetime, max_attempts, backoff, if_absent, traceparent
    )
    if not keys.per_topic:  # push.lua keeps the classic layout's index and wakes the server itself
        return _replies.push(call, (yield call))
    # One round trip: the index write rides after the script with a time
    # from this machine's clock (PROTOCOL.md, "push sends its index write
    # with the script"); waiting for the answered due time would take two.
    t = str(call.args[1])
    early = estimate(time.time(), int(call.args[3]))
    step = Early(call, [("ZADD", keys.due, "LT", "CH", early, t), ("SADD", keys.topics, t)])
    replies = yield step
    resent = isinstance(replies, (list, tuple)) and bool(replies) and isinstance(replies[0], NoScriptError)
    if resent:  # nothing was pushed; the ZADD may have lowered the index all the same
        replies = yield step._replace(text=True)
    script_reply, zadd = _early_replies(step, replies)[:2]
    due = _replies.push(call, script_reply)  # an id taken: IdTakenError, and no more index writes
    answered = _replies.time_text(script_reply)
    then = follow_up(early, answered, _lowered(zadd), resent)
    if then == WRITE:
        yield from index(keys, {t: answered}, pushed=True)
    elif then == WAKE:
        yield from _wake(keys, [answered])
    return due


def push_many(keys: Keys, jobs: object, if_absent: object) -> Op[List[float]]:
    # Every job is checked before the first pipeline is sent.
    batches = _calls.push_many_batches(keys, jobs, if_absent)
    outcomes: List[Union[float, Taken]] = []
    for chunk in _calls.chunks(batches.calls):
        replies = yield Pipeline(chunk)
        outcomes.extend(_replies.push_many_pipeline(chunk, replies))
        if keys.per_topic:
            times: Dict[str, str] = {}
            for call, reply in zip(chunk, replies):
                for topic, one in zip(_calls.push_many_topics(call), reply):
                    if not isinstance(one, (list, tuple)):  # a due time, not a taken id
                        _earlier(times, topic, _replies.time_text(one))
            yield from index(keys, times, pushed=True)
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


def _reserved(keys: Keys, call: ScriptCall, reply: object) -> Op[Optional[ReservedMessage]]:
    """A reserve.lua reply, then the index write for the reservation's deadline."""
    job = _replies.reserved(reply)
    if job is not None:
        yield from index(keys, {job.topic: _replies.time_text(reply[6])})  # type: ignore[index]
    return job


def reserve(keys: Keys, topic: object, ttr: object) -> Op[Optional[ReservedMessage]]:
    call = _calls.reserve_call(keys, topic, ttr)
    return (yield from _reserved(keys, call, (yield call)))


def reserve_many(
    keys: Keys, topic: object, ttr: object, n: object, acks: object
) -> Op[Tuple[List[bool], List[ReservedMessage]]]:
    many = _calls.reserve_many_calls(keys, topic, ttr, n, acks)
    if not many.calls:
        return [], []
    replies = yield Pipeline(many.calls)
    results = [
        _replies.reserved_many(reply, (len(call.args) - 3) // 2) for call, reply in zip(many.calls, replies)
    ]
    jobs = results[0][1] if many.reserves else []
    if jobs:
        times: Dict[str, str] = {}
        for entry in replies[0][1]:
            _earlier(times, jobs[0].topic, _replies.time_text(entry[6]))
        yield from index(keys, times)
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
        job = yield from _reserved(keys, call, (yield call))
        if job is not None:
            return job


def ack(keys: Keys, job: object, receipt: object, topic: object = None) -> Op[bool]:
    return _replies.flag((yield _calls.ack_call(keys, job, receipt, topic)), "ack.lua")


def touch(keys: Keys, job: object, ttr: object, receipt: object, topic: object = None) -> Op[Optional[float]]:
    call = _calls.touch_call(keys, job, ttr, receipt, topic)
    reply = yield call
    deadline = _replies.optional_time(reply, "touch.lua", "deadline")
    # A shorter ttr brings the deadline in: the index must hear of it, or the
    # server would expire the reservation only at the index's later time.
    if deadline is not None:
        yield from index(keys, {str(_calls.held_topic(job, topic)): _replies.time_text(reply)})
    return deadline


def release(
    keys: Keys, job: object, delay: object, receipt: object, error: object = None, topic: object = None
) -> Op[bool]:
    reply = yield _calls.release_call(keys, job, delay, receipt, error, topic)
    held = _replies.ended(reply)
    if held and _replies.time_text(reply) != "dead":
        yield from index(keys, {str(_calls.held_topic(job, topic)): _replies.time_text(reply)})
    return held


def bury(keys: Keys, job: object, receipt: object, error: object = None, topic: object = None) -> Op[bool]:
    return _replies.ended((yield _calls.bury_call(keys, job, receipt, error, topic)))


def reschedule(keys: Keys, job_id: object, delay: object, topic: object = None) -> Op[Optional[float]]:
    reply = yield _calls.reschedule_call(keys, job_id, delay, topic)
    due = _replies.optional_time(reply, "reschedule.lua", "due time")
    if due is not None:
        yield from index(keys, {str(topic): _replies.time_text(reply)})
    return due


def dead_letters(keys: Keys, topic: object, start: object, count: object) -> Op[List[DeadLetter]]:
    return _replies.dead_letters((yield _calls.dead_list_call(keys, topic, start, count)))


def dead_take(keys: Keys, action: str, topic: object, ids: object) -> Op[int]:
    # Every call handles at most DEAD_BATCH entries so that Redis is never
    # held for long; "all" repeats until a call takes fewer than asked.
    every, calls = _calls.dead_take_calls(keys, action, topic, ids)
    total = 0
    indexed = action != "requeue"  # a requeue makes jobs due now: the index must say so, once

    def done(count: int) -> Op[None]:
        nonlocal total, indexed
        total += count
        if count and not indexed:
            indexed = True
            yield from index(keys, {str(topic): "0"})

    while every is not None:
        count, taken = _replies.dead_taken((yield every))
        yield from done(count)
        if taken < _calls.DEAD_BATCH:
            break
    for call in calls:
        yield from done(_replies.dead_taken((yield call))[0])
    return total
