"""Redis's replies, as the SDK's values: one decoder per script (its header
says what it returns); a reply that does not fit is a :class:`ProtocolError`.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

from ._calls import ScriptCall, push_many_ids
from ._names import name
from ._trace import from_redis
from .errors import IdTakenError, ProtocolError
from .models import DeadLetter, FlowState, Message, RateLimit, ReservedMessage, Taken


def _text(kind: str, value: object) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"{kind} in Redis's reply is not UTF-8: {value!r}") from None
    if isinstance(value, str):
        return value
    raise ProtocolError(f"expected {kind} as a string in Redis's reply, got {value!r}")


def _name(kind: str, value: object) -> str:
    """An id or topic in Redis's reply: any bytes, those that are not UTF-8
    with surrogate escapes (:mod:`delayer._names`), never an error: a job
    whose names the SDK cannot decode is still handed out whole."""
    if isinstance(value, bytes):
        return name(value)
    if isinstance(value, str):
        return value
    raise ProtocolError(f"expected {kind} as a string in Redis's reply, got {value!r:.200}")


def _int(kind: str, value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ProtocolError(f"expected {kind} as a count in Redis's reply, got {value!r:.200}")


def _body(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if not isinstance(value, bytes):
        raise ProtocolError(f"expected the body as bytes, got {value!r:.200}")
    return value


def due(reply: object, script: str = "push.lua", what: str = "due time") -> float:
    """A time a script returned, ``"s.mmm"`` (push.lua's due time), as float Unix seconds."""
    text = _text(what, reply)
    try:
        value = float(text)
    except ValueError:
        raise ProtocolError(f"{script} returned {text!r}, not a {what}") from None
    if not math.isfinite(value):
        raise ProtocolError(f"{script} returned {text!r}, not a {what}")
    return value


def _pushed(reply: object, job_id: str, script: str) -> Union[float, Taken]:
    """One job's outcome as push.lua (or push_many.lua, per job; or their ``_topic`` kin) returns it:
    its due time ``"s.mmm"``, or ``[topic, due]`` of the job holding a taken id
    (due ``""`` when that job does not wait any more)."""
    if not isinstance(reply, (list, tuple)):
        return due(reply, script)
    if len(reply) != 2:
        raise ProtocolError(f"{script} returned {reply!r:.200}, expected a due time or [topic, due]")
    topic, when = reply
    return Taken(job_id, _name("topic", topic), None if when in (b"", "") else due(when, script))


def push(call: ScriptCall, reply: object) -> float:
    """push.lua's (push_topic.lua's) reply to ``call`` as the due time; :class:`IdTakenError` when the id was taken."""
    pushed = _pushed(reply, str(call.args[0]), call.script + ".lua")
    if isinstance(pushed, Taken):
        raise IdTakenError([pushed], [None])
    return pushed


def push_many_pipeline(calls: Sequence[ScriptCall], replies: Sequence[object]) -> List[Union[float, Taken]]:
    """The outcomes of a ``push_many`` pipeline: one list per call."""
    out: List[Union[float, Taken]] = []
    for call, reply in zip(calls, replies):
        ids = push_many_ids(call)
        if not isinstance(reply, (list, tuple)) or len(reply) != len(ids):
            raise ProtocolError(f"{call.script}.lua returned {reply!r:.200}, expected a list of {len(ids)} due times")
        out.extend(_pushed(r, i, call.script + ".lua") for r, i in zip(reply, ids))
    return out


def push_many(outcomes: Sequence[Union[float, Taken]]) -> List[float]:
    """The due times of a whole ``push_many``; :class:`IdTakenError` if any id was taken."""
    taken = [o for o in outcomes if isinstance(o, Taken)]
    if taken:
        raise IdTakenError(taken, [None if isinstance(o, Taken) else o for o in outcomes])
    return [o for o in outcomes if not isinstance(o, Taken)]


class Gate(NamedTuple):
    """A claim's wait instruction ``["paused", recheck_ms, gate]``: block on
    ``key`` (``BRPOPLPUSH key key``) for at most ``recheck`` seconds, then claim again."""

    key: bytes
    recheck: float


def gate(reply: object) -> Optional[Gate]:
    """The wait instruction pop.lua, take.lua and reserve.lua answer while the
    topic is paused, or None for any other reply: the one place that knows its
    shape (3 long, first ``"paused"``; a job is 4 or 8 long)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 3 or reply[0] not in (b"paused", "paused"):
        return None
    _, ms, key = reply
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0 or not isinstance(key, (bytes, str)) or not key:
        raise ProtocolError(f"expected [\"paused\", recheck_ms, gate key], got {reply!r:.200}")
    # 0 ms would be "block forever" to Redis: 1 ms is the shortest wait.
    return Gate(key.encode("utf-8") if isinstance(key, str) else key, max(ms, 1) / 1000.0)


def message(reply: object) -> Optional[Message]:
    """pop.lua's / take.lua's reply: ``[id, topic, body, traceparent]``, or
    nil or a wait instruction (:func:`gate`): None."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 4:
        if gate(reply) is not None:
            return None
        raise ProtocolError(f"expected [id, topic, body, traceparent] or nil, got {reply!r:.200}")
    job_id, topic, body, traceparent = reply
    i = _name("id", job_id)
    return Message(id=i, topic=_name("topic", topic), body=_body(body), traceparent=from_redis(i, traceparent))


def flag(reply: object, script: str) -> bool:
    """remove.lua's (remove_topic.lua's) or ack.lua's reply: 1 or 0."""
    if isinstance(reply, int) and not isinstance(reply, bool) and reply in (0, 1):
        return reply == 1
    raise ProtocolError(f"{script} returned {reply!r}, expected 0 or 1")


def reserved(reply: object) -> Optional[ReservedMessage]:
    """reserve.lua's reply: ``[id, topic, body, attempts, max_attempts, receipt,
    deadline, traceparent]``, or nil or a wait instruction (:func:`gate`): None."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 8:
        if gate(reply) is not None:
            return None
        raise ProtocolError("expected [id, topic, body, attempts, max_attempts, receipt, deadline, traceparent] "
                            f"or nil, got {reply!r:.200}")
    job_id, topic, body, attempts, max_attempts, receipt, deadline, traceparent = reply
    # The usual reply (bytes, counts, a UTF-8 receipt, an ASCII finite deadline)
    # without the helpers' 8 calls, as once per job a Worker gets; else the helpers.
    when = math.nan
    if type(job_id) is type(topic) is type(body) is type(receipt) is type(deadline) is bytes:
        if type(attempts) is type(max_attempts) is int and attempts >= 0 <= max_attempts:
            try:  # float(bytes) fails unless ASCII; UnicodeDecodeError is a ValueError
                text, when = receipt.decode(), float(deadline)
            except ValueError:
                pass
    if math.isfinite(when):
        i, t = name(job_id), name(topic)
    else:
        i, t, body, attempts = _name("id", job_id), _name("topic", topic), _body(body), _int("attempts", attempts)
        max_attempts, text = _int("max_attempts", max_attempts), _text("receipt", receipt)
        when = due(deadline, "reserve.lua", "deadline")
    job = object.__new__(ReservedMessage)  # its __init__ sets each field by object.__setattr__
    vars(job).update(id=i, topic=t, body=body, attempts=attempts, max_attempts=max_attempts, receipt=text,
                     deadline=when, traceparent=from_redis(i, traceparent))
    return job


class Batch(NamedTuple):
    """A reserve.lua batch: a result per ack, the jobs, and the wait
    instruction when the topic is paused (then no jobs)."""

    acked: List[bool]
    jobs: List[ReservedMessage]
    paused: Optional[Gate]


def reserved_many(reply: object, acks: int) -> Tuple[List[bool], List[ReservedMessage]]:
    """reserve.lua's batch-mode reply ``{acks, jobs}`` (or ``{acks, {}, W}``
    while paused): one 1|0 per ack sent (``acks`` of them), then the jobs
    reserved, each as :func:`reserved`."""
    got = batch(reply, acks)
    return got.acked, got.jobs


def batch(reply: object, acks: int) -> Batch:
    """:func:`reserved_many`, and the wait instruction of a paused topic's reply."""
    paused = None
    if isinstance(reply, (list, tuple)) and len(reply) == 3:
        paused = gate(reply[2])
        if paused is None or reply[1]:
            raise ProtocolError(f"reserve.lua returned {reply!r:.200}, expected {{acks, {{}}, wait}} in batch mode")
        reply = reply[:2]
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError(f"reserve.lua returned {reply!r:.200}, expected {{acks, jobs}} in batch mode")
    done, jobs = reply
    if not isinstance(done, (list, tuple)) or len(done) != acks:
        raise ProtocolError(f"reserve.lua returned {done!r:.200}, expected {acks} ack results")
    if not isinstance(jobs, (list, tuple)):
        raise ProtocolError(f"reserve.lua returned {jobs!r:.200}, expected a list of jobs")
    out = []
    for entry in jobs:
        job = reserved(entry)
        if job is None:
            raise ProtocolError("reserve.lua returned nil among the jobs of a batch")
        out.append(job)
    return Batch([flag(d, "reserve.lua") for d in done], out, paused)


def ended(reply: object) -> bool:
    """release.lua's (release_topic.lua's) reply in "held" mode: a due time or
    ``"dead"`` (the reservation was held and is ended) or nil (it was not)."""
    if reply is None:
        return False
    if _text("release result", reply) == "dead":
        return True
    due(reply, "release.lua")
    return True


def optional_time(reply: object, script: str, what: str) -> Optional[float]:
    """reschedule.lua's new due time or touch.lua's new deadline; nil: None
    (the job is not waiting, the reservation not held)."""
    if reply is None:
        return None
    return due(reply, script, what)


def dead_letters(reply: object) -> List[DeadLetter]:
    """dead.lua's (or dead_topic.lua's) ``list``: ``[id, topic, body, attempts, reason, dead_at, last_error]`` each."""
    if not isinstance(reply, (list, tuple)):
        raise ProtocolError(f"dead.lua returned {reply!r:.200}, expected a list of dead letters")
    out = []
    for entry in reply:
        if not isinstance(entry, (list, tuple)) or len(entry) != 7:
            raise ProtocolError("expected [id, topic, body, attempts, reason, dead_at, last_error], "
                                f"got {entry!r:.200}")
        job_id, topic, body, attempts, reason, dead_at, last_error = entry
        # "" for a dead_at the bucket lacks (one written by hand): 0.0, rather than failing the listing;
        # a last error's bytes (a worker wrote them) are shown lossily for the same reason.
        when = 0.0 if dead_at in (b"", "") else due(dead_at, "dead.lua", "dead_at")
        out.append(DeadLetter(id=_name("id", job_id), topic=_name("topic", topic), body=_body(body),
                              attempts=_int("attempts", attempts), reason=_name("reason", reason), dead_at=when,
                              last_error=_body(last_error).decode("utf-8", "replace") or None))
    return out


def dead_taken(reply: object) -> Tuple[int, int]:
    """dead.lua's (dead_topic.lua's) ``requeue`` / ``purge`` reply: ``(done, taken)``."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError(f"dead.lua returned {reply!r:.200}, expected [done, taken]")
    return _int("done", reply[0]), _int("taken", reply[1])


def blmove(reply: object) -> bool:
    """BLMOVE's reply: the id it moved back in place (True: the queue holds
    something, for reserve.lua to judge) or nil on timeout (False)."""
    if reply is None:
        return False
    if not isinstance(reply, (bytes, str)):
        raise ProtocolError(f"expected an id or nil from BLMOVE, got {reply!r:.200}")
    return True


def brpop(reply: object) -> Optional[str]:
    """BRPOP's reply ``[key, id]`` (or nil on timeout) as the id."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError(f"expected [key, id] from BRPOP, got {reply!r:.200}")
    return _name("id", reply[1])


def flow(reply: object) -> FlowState:
    """flow.lua's (flow_topic.lua's) reply ``[paused_since, changed, now, held,
    per_second, burst]``: ``paused_since`` ``"s.mmm"`` or ``""`` (running),
    ``changed`` 1 or 0, Redis's clock ``now`` ``"s.mmm"``, ``held`` a count, the
    rate limit as stored (``""``: none)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 6:
        raise ProtocolError(f"flow.lua returned {reply!r:.200}, expected "
                            "[paused_since, changed, now, held, per_second, burst]")
    since, changed, now, held, per_second, burst = reply
    if not isinstance(since, (bytes, str)):
        raise ProtocolError(f"flow.lua returned {since!r:.200} as the pause time, expected a string")
    return FlowState(paused_since=_since(since), held=_int("held", held), changed=flag(changed, "flow.lua"),
                     at=due(now, "flow.lua", "time"), rate_limit=rate_limit(per_second, burst))


def rate_limit(per_second: object, burst: object) -> Optional[RateLimit]:
    """A flow hash's ``per_second`` and ``burst`` as flow.lua and stats.lua hand
    them on (and the per-topic stats HMGET): ``""`` no limit. flow.lua writes a decimal and a whole
    number; a hash edited by hand may hold anything, and a value that is no
    number reads as no limit rather than failing every read of the topic
    (what the movers make of it is theirs to say: no rule is repeated here)."""
    if not isinstance(per_second, (bytes, str)) or not isinstance(burst, (bytes, str)):
        # The scripts hand on strings: this is no reply of theirs.
        raise ProtocolError(f"expected the rate limit as strings in Redis's reply, got {[per_second, burst]!r:.200}")
    if per_second in (b"", ""):
        return None
    try:
        rate = float(per_second)  # bytes too; a non-ASCII one is a ValueError
        whole = float(burst)
    except ValueError:
        return None
    if not (math.isfinite(rate) and math.isfinite(whole) and whole.is_integer()):
        return None
    return RateLimit(per_second=rate, burst=int(whole))


def _since(value: Union[bytes, str]) -> Optional[float]:
    """A flow hash's ``paused`` as flow.lua hands it on: ``""`` running (None);
    a pause written by hand may hold anything, and every value pauses the
    topic (the hand-out scripts test the field, not its value): 0.0 for one
    that is no time, rather than failing every read of a paused topic."""
    if value in (b"", ""):
        return None
    try:
        return due(value, "flow.lua", "pause time")
    except ProtocolError:
        return 0.0
