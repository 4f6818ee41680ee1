"""Logic shared by the synchronous and asynchronous clients.

Input validation (docs/PROTOCOL.md, "Input rules"), script arguments, reply
parsing, error translation and client defaults live here once; the two client
modules only do I/O.
"""

from __future__ import annotations

import math
from fractions import Fraction
import unicodedata
from os import PathLike, fspath
from types import TracebackType
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    MutableMapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)
from urllib.parse import quote, unquote, urlsplit

from redis.exceptions import (
    AuthenticationError,
    ConnectionError as RedisConnectionError,
    RedisError,
    ResponseError,
    TimeoutError as RedisTimeoutError,
)

from .errors import ConfigError, ConnectionFailed, DelayerError, IdTakenError, InvalidArgument, ProtocolError
from .keys import Keys
from .models import Backoff, DeadLetter, Job, Message, ReservedMessage, Taken

#: Longest id or topic, in UTF-8 bytes.
MAX_NAME_BYTES = 200
#: Longest delay and ready_max_lifetime: 10 years, in seconds.
MAX_SECONDS = 315_360_000
#: How many jobs one push_many.lua call takes (the script's limit).
JOBS_PER_CALL = 100
#: How many push_many.lua calls ``push_many`` pipelines per round trip.
CALLS_PER_PIPELINE = 10
#: The URL used when none is given.
DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Seconds to wait for a TCP connection before giving up.
CONNECT_TIMEOUT = 5.0
#: The largest max_attempts (0 means no limit).
MAX_ATTEMPTS_LIMIT = 1_000_000
#: The most dead letters one dead.lua call lists, re-queues or purges: one
#: call must not hold Redis for long.
DEAD_BATCH = 1000

# Unicode White_Space (the same set as Rust's char::is_whitespace), fixed here
# so that every Python version rejects the same names.
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

Number = Union[int, float]
Body = Union[bytes, bytearray, memoryview, str]


# --------------------------------------------------------------------------
# input rules


def check_name(kind: str, value: object) -> str:
    """Check an id or topic: 1..200 UTF-8 bytes, no whitespace, controls or braces."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{kind} must be a str, not {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{kind} is not valid UTF-8 (it holds a lone surrogate)") from None
    if size == 0:
        raise InvalidArgument(f"{kind} must not be empty")
    if size > MAX_NAME_BYTES:
        raise InvalidArgument(f"{kind} is {size} bytes of UTF-8; at most {MAX_NAME_BYTES} allowed")
    for pos, ch in enumerate(value):
        if ch in _WHITESPACE:
            raise InvalidArgument(f"{kind} must not contain whitespace (U+{ord(ch):04X} at {pos})")
        if unicodedata.category(ch) == "Cc":
            raise InvalidArgument(f"{kind} must not contain control characters (U+{ord(ch):04X} at {pos})")
        if ch in "{}":
            raise InvalidArgument(f"{kind} must not contain '{{' or '}}' (reserved for Redis Cluster hash tags)")
    return value


def _number(kind: str, value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{kind} must be an int or float, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{kind} must be finite, got {value!r}")
    return value


def delay_ms(value: object, kind: str = "delay") -> int:
    """Check a delay (0 to 10 years, seconds) and return it in whole milliseconds, rounded.

    ``kind`` names the argument in the error (a backoff or reschedule delay
    follows the same rules).
    """
    seconds = _number(kind, value)
    if seconds < 0 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"{kind} must be 0 to {MAX_SECONDS} seconds, got {seconds!r}")
    return _round_ms(seconds)


def _round_ms(seconds: Number) -> int:
    """``seconds`` (checked: 0 to 10 years) in whole milliseconds, rounded as PROTOCOL.md says."""
    if isinstance(seconds, int):
        return seconds * 1000
    # As docs/PROTOCOL.md: to the nearest nanosecond, then to the millisecond,
    # halves up (Rust's Duration semantics, so 1.2345 s is 1235 ms). Exact
    # arithmetic: seconds * 1000.0 in floating point loses precision on huge delays.
    nanos = math.floor(Fraction(seconds) * 1_000_000_000 + Fraction(1, 2))
    return min((nanos + 500_000) // 1_000_000, MAX_SECONDS * 1000)


def lifetime_ms(value: object) -> int:
    """Check a ready_max_lifetime (1 s to 10 years, whole seconds) and return milliseconds."""
    seconds = _number("ready_max_lifetime", value)
    if isinstance(seconds, float):
        if not seconds.is_integer():
            raise InvalidArgument(f"ready_max_lifetime must be whole seconds, got {seconds!r}")
        seconds = int(seconds)
    if seconds < 1 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"ready_max_lifetime must be 1 to {MAX_SECONDS} seconds, got {seconds!r}")
    return seconds * 1000


def ttr_ms(value: object) -> int:
    """Check a reserve ttr (more than 0, at most 10 years) and return whole milliseconds.

    Rounded as a delay is, and at least 1 ms after rounding: a ttr of 0 would
    hand the job out and take it back at once.
    """
    seconds = _number("ttr", value)
    if seconds <= 0 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"ttr must be more than 0 and at most {MAX_SECONDS} seconds, got {seconds!r}")
    ms = _round_ms(seconds)
    if ms < 1:
        raise InvalidArgument(f"ttr must be at least 1 ms after rounding to the millisecond, got {seconds!r} s")
    return ms


def check_max_attempts(value: object) -> int:
    """Check a max_attempts: an int from 0 (no limit) to 1,000,000."""
    return _count("max_attempts", value, 0, MAX_ATTEMPTS_LIMIT)


def _count(kind: str, value: object, low: int, high: Optional[int]) -> int:
    """Check a whole number from ``low`` to ``high`` (None: no upper bound); bool is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{kind} must be an int, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"{low} to {high}" if high is not None else f"{low} or more"
        raise InvalidArgument(f"{kind} must be {bounds}, got {value!r}")
    return value


def check_timeout(value: object) -> float:
    """Check a bpop / breserve timeout: seconds >= 0, 0 meaning forever."""
    seconds = _number("timeout", value)
    if seconds < 0:
        raise InvalidArgument(f"timeout must be 0 (forever) or more seconds, got {seconds!r}")
    return float(seconds)


def wait_deadline(timeout: float, now: float) -> Optional[float]:
    """The monotonic deadline of a checked bpop / breserve ``timeout`` started at
    ``now``: None for 0 (forever). With :func:`brpop_seconds` it keeps the
    whole wait within one timeout, however many times it has to wait again."""
    return None if timeout == 0 else now + timeout


def encode_body(value: object) -> bytes:
    """Return the body as bytes: bytes-like as is, ``str`` encoded as UTF-8."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument("body is a str that is not valid UTF-8 (lone surrogate)") from None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"body must be bytes or str, not {type(value).__name__}")


def check_prefix(value: object) -> str:
    """Check a key prefix: any ``str`` (prepended as is)."""
    if not isinstance(value, str):
        raise InvalidArgument(f"prefix must be a str, not {type(value).__name__}")
    return value


class ScriptCall(NamedTuple):
    """The KEYS and ARGV of one script call."""

    keys: List[str]
    args: List[Union[str, bytes, int]]


def retry_args(max_attempts: object, backoff: object) -> List[Union[str, bytes, int]]:
    """Check push's retry settings; return push.lua's ARGV[6..9] ("" = not set).

    max_attempts, then backoff kind, backoff_ms, backoff_max_ms.
    """
    args: List[Union[str, bytes, int]] = ["" if max_attempts is None else check_max_attempts(max_attempts)]
    if backoff is None:
        args += ["", "", ""]
    elif isinstance(backoff, Backoff):
        args += [backoff.kind, backoff.backoff_ms, backoff.backoff_max_ms]
    else:
        raise InvalidArgument(
            f"backoff must be a delayer.Backoff (Backoff.fixed / Backoff.exponential), not {type(backoff).__name__}"
        )
    return args


def push_call(
    keys: Keys,
    topic: object,
    job_id: object,
    delay: object,
    body: object,
    ready_max_lifetime: object,
    max_attempts: object = None,
    backoff: object = None,
    if_absent: object = False,
) -> ScriptCall:
    """Validate one push and return push.lua's KEYS and ARGV.

    ARGV is id, topic, body, delay ms, lifetime ms, max_attempts, backoff,
    backoff_ms, backoff_max_ms ("" for the unset ones: the bucket is then
    exactly Delayer 1.x's), the duplicate policy (:func:`policy`) and the
    wake channel.
    """
    topic_s = check_name("topic", topic)
    id_s = check_name("id", job_id)
    ms = delay_ms(delay)
    life = lifetime_ms(ready_max_lifetime)
    data = encode_body(body)
    args: List[Union[str, bytes, int]] = [id_s, topic_s, data, ms, life]
    args += retry_args(max_attempts, backoff)
    args += [policy(if_absent), keys.wake]
    return ScriptCall([keys.job_pool, keys.job_bucket(id_s)], args)


def policy(if_absent: object) -> str:
    """push.lua's / push_many.lua's duplicate policy for ``if_absent``:
    ``"absent"`` (write nothing for an id that is taken) or ``"replace"``."""
    if not isinstance(if_absent, bool):
        raise InvalidArgument(f"if_absent must be a bool, not {type(if_absent).__name__}")
    return "absent" if if_absent else "replace"


def push_many_calls(keys: Keys, jobs: object, if_absent: object = False) -> List[ScriptCall]:
    """Validate every job of a ``push_many``, then build its push_many.lua calls.

    Nothing is built unless every job is valid. Each call takes up to
    :data:`JOBS_PER_CALL` jobs: KEYS is the pool; ARGV is the bucket prefix,
    the duplicate policy, the wake channel, then nine values per job: id,
    topic, body, delay ms, lifetime ms, max_attempts, backoff, backoff_ms,
    backoff_max_ms ("" when not set).
    """
    mode = policy(if_absent)
    try:
        items = list(jobs)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"jobs must be an iterable of Job, not {type(jobs).__name__}") from None
    pushes = []
    for i, job in enumerate(items):
        if not isinstance(job, Job):
            raise InvalidArgument(f"jobs[{i}] must be a delayer.Job, not {type(job).__name__}")
        try:
            push = push_call(
                keys, job.topic, job.id, job.delay, job.body, job.ready_max_lifetime, job.max_attempts, job.backoff
            )
            pushes.append(push)
        except InvalidArgument as e:
            raise InvalidArgument(f"jobs[{i}]: {e}") from None
    calls = []
    for start in range(0, len(pushes), JOBS_PER_CALL):
        args: List[Union[str, bytes, int]] = [keys.bucket_prefix, mode, keys.wake]
        for push in pushes[start : start + JOBS_PER_CALL]:
            args.extend(push.args[:VALUES_PER_JOB])  # push.lua's first nine ARGV
        calls.append(ScriptCall([keys.job_pool], args))
    return calls


def push_many_jobs(call: ScriptCall) -> int:
    """How many jobs a push_many.lua call from :func:`push_many_calls` holds."""
    return (len(call.args) - 3) // VALUES_PER_JOB


def push_many_ids(call: ScriptCall) -> List[str]:
    """The ids of the jobs of a push_many.lua call from :func:`push_many_calls`, in order."""
    return [str(a) for a in call.args[3::VALUES_PER_JOB]]


#: How many ARGV values push_many.lua takes per job.
VALUES_PER_JOB = 9


def pop_call(keys: Keys, topic: object) -> ScriptCall:
    """Validate a pop and return pop.lua's KEYS and ARGV."""
    t = check_name("topic", topic)
    return ScriptCall([keys.ready_queue(t), keys.malformed, keys.job_pool, keys.reserved], [keys.bucket_prefix])


def take_call(keys: Keys, job_id: str) -> ScriptCall:
    """take.lua's KEYS and ARGV for an id just popped with BRPOP."""
    return ScriptCall([keys.job_bucket(job_id), keys.malformed, keys.job_pool, keys.reserved], [job_id])


def remove_call(keys: Keys, job_id: object) -> ScriptCall:
    """Validate a remove and return remove.lua's KEYS and ARGV."""
    i = check_name("id", job_id)
    return ScriptCall([keys.job_pool, keys.job_bucket(i)], [i])


def reserve_call(keys: Keys, topic: object, ttr: object) -> ScriptCall:
    """Validate a reserve and return reserve.lua's KEYS and ARGV.

    KEYS: ready queue, reserved, malformed, receipt_seq, pool; ARGV: bucket
    prefix, ttr ms. KEYS[0] is also the list ``breserve`` waits on.
    """
    t = check_name("topic", topic)
    ms = ttr_ms(ttr)
    return ScriptCall(
        [keys.ready_queue(t), keys.reserved, keys.malformed, keys.receipt_seq, keys.job_pool],
        [keys.bucket_prefix, ms],
    )


def held(job: object, receipt: object) -> Tuple[str, str]:
    """The id and receipt (``""``: whichever reservation is current) that ack,
    release and bury act on.

    ``job`` is a :class:`ReservedMessage` (its id and receipt: only that
    reservation) or an id, with ``receipt`` when the caller knows it.
    """
    if isinstance(job, ReservedMessage):
        if receipt is not None:
            raise InvalidArgument("receipt= is for a job given by id; a ReservedMessage carries its own")
        if not isinstance(job.receipt, str) or job.receipt == "":
            raise InvalidArgument("the ReservedMessage has no receipt")
        receipt = job.receipt
        job = job.id
    elif not isinstance(job, str):
        raise InvalidArgument(f"job must be a ReservedMessage or an id (str), not {type(job).__name__}")
    job_id = check_name("id", job)
    if receipt is None:
        return job_id, ""
    if not isinstance(receipt, str):
        raise InvalidArgument(f"receipt must be a str, not {type(receipt).__name__}")
    if receipt == "":
        raise InvalidArgument('receipt must not be empty: pass None for "whichever reservation is current"')
    try:
        receipt.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument("receipt is not valid UTF-8 (it holds a lone surrogate)") from None
    return job_id, receipt


def ack_call(keys: Keys, job: object, receipt: object) -> ScriptCall:
    """Validate an ack and return ack.lua's KEYS (reserved, bucket, pool) and ARGV (id, receipt)."""
    job_id, r = held(job, receipt)
    return ScriptCall([keys.reserved, keys.job_bucket(job_id), keys.job_pool], [job_id, r])


def touch_call(keys: Keys, job: object, ttr: object, receipt: object) -> ScriptCall:
    """Validate a touch and return touch.lua's KEYS (reserved, bucket, pool) and ARGV (id, receipt, ttr ms).

    ``job`` and ``receipt`` as for ack (:func:`held`), ``ttr`` as for reserve (:func:`ttr_ms`).
    """
    job_id, r = held(job, receipt)
    ms = ttr_ms(ttr)
    return ScriptCall([keys.reserved, keys.job_bucket(job_id), keys.job_pool], [job_id, r, ms])


def _release_call(keys: Keys, job: object, receipt: object, action: Union[str, int]) -> ScriptCall:
    job_id, r = held(job, receipt)
    # "held": end this one reservation. The "expired" mode is the server's.
    return ScriptCall(
        [keys.reserved, keys.job_pool, keys.malformed], [keys.prefix, action, "held", job_id, r, keys.wake]
    )


def release_call(keys: Keys, job: object, delay: object, receipt: object) -> ScriptCall:
    """Validate a release and return release.lua's KEYS and ARGV.

    No ``delay`` means the job's own backoff (``"backoff"``); otherwise the
    delay in ms, by the delay rules.
    """
    action: Union[str, int] = "backoff" if delay is None else delay_ms(delay)
    return _release_call(keys, job, receipt, action)


def bury_call(keys: Keys, job: object, receipt: object) -> ScriptCall:
    """Validate a bury and return release.lua's KEYS and ARGV (action ``"bury"``)."""
    return _release_call(keys, job, receipt, "bury")


def reschedule_call(keys: Keys, job_id: object, delay: object) -> ScriptCall:
    """Validate a reschedule and return reschedule.lua's KEYS (pool, bucket) and ARGV (id, delay ms, wake channel)."""
    i = check_name("id", job_id)
    ms = delay_ms(delay)
    return ScriptCall([keys.job_pool, keys.job_bucket(i)], [i, ms, keys.wake])


def dead_list_call(keys: Keys, topic: object, start: object, count: object) -> ScriptCall:
    """Validate a dead-letter listing (start >= 0, count 1..1000) and return dead.lua's call."""
    t = check_name("topic", topic)
    first = _count("start", start, 0, None)
    n = _count("count", count, 1, DEAD_BATCH)
    return ScriptCall([keys.dead(t), keys.job_pool], [keys.bucket_prefix, "list", first, n])


def dead_take_calls(
    keys: Keys, action: str, topic: object, ids: object
) -> Tuple[Optional[ScriptCall], List[ScriptCall]]:
    """Validate a re-queue or purge (``action``) of dead letters; return ``(every, by_ids)``.

    ``ids`` None means all: ``every`` is the call taking :data:`DEAD_BATCH`
    entries from the oldest end, to repeat until a call takes fewer
    (:func:`parse_dead_taken`). Otherwise ``by_ids`` holds one call per
    :data:`DEAD_BATCH` ids (none for no ids), every id checked first.
    """
    if action not in ("requeue", "purge"):
        raise ValueError(f"dead.lua takes requeue or purge here, not {action!r}")
    t = check_name("topic", topic)
    call_keys = [keys.dead(t), keys.job_pool]
    if ids is None:
        return ScriptCall(call_keys, [keys.bucket_prefix, action, DEAD_BATCH]), []
    if isinstance(ids, (str, bytes, bytearray, memoryview)):
        raise InvalidArgument("ids must be an iterable of ids (a str is one id: wrap it in a list)")
    try:
        items = list(ids)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgument(f"ids must be an iterable of ids or None (all), not {type(ids).__name__}") from None
    checked = []
    for n, item in enumerate(items):
        try:
            checked.append(check_name("id", item))
        except InvalidArgument as e:
            raise InvalidArgument(f"ids[{n}]: {e}") from None
    calls = []
    for start in range(0, len(checked), DEAD_BATCH):
        part = checked[start : start + DEAD_BATCH]
        # ARGV[3] (a count) is ignored when ids follow; it says how many.
        calls.append(ScriptCall(call_keys, [keys.bucket_prefix, action, len(part), *part]))
    return None, calls


def chunks(calls: Sequence[ScriptCall], size: int = CALLS_PER_PIPELINE) -> List[Sequence[ScriptCall]]:
    """Split ``calls`` into pipeline-sized pieces."""
    return [calls[i : i + size] for i in range(0, len(calls), size)]


def brpop_seconds(deadline: Optional[float], now: float) -> Optional[float]:
    """The BRPOP (bpop) or BLMOVE (breserve) timeout for the time left until ``deadline``.

    Returns 0 (forever) without a deadline, None when the time is up, and
    otherwise the remaining time rounded up to a whole millisecond (never 0,
    which BRPOP and BLMOVE would take as "forever").
    """
    if deadline is None:
        return 0
    ms = math.ceil((deadline - now) * 1000.0)
    if ms <= 0:
        return None
    return ms / 1000.0


# --------------------------------------------------------------------------
# replies


def _text(kind: str, value: object) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"{kind} in Redis's reply is not UTF-8: {value!r}") from None
    if isinstance(value, str):
        return value
    raise ProtocolError(f"expected {kind} as a string in Redis's reply, got {value!r}")


def parse_due(reply: object, script: str = "push.lua", what: str = "due time") -> float:
    """A time a script returned, ``"s.mmm"`` (push.lua's due time), as float Unix seconds."""
    text = _text(what, reply)
    try:
        due = float(text)
    except ValueError:
        raise ProtocolError(f"{script} returned {text!r}, not a {what}") from None
    if not math.isfinite(due):
        raise ProtocolError(f"{script} returned {text!r}, not a {what}")
    return due


def parse_pushed(reply: object, job_id: str, script: str = "push.lua") -> Union[float, Taken]:
    """One job's outcome as push.lua (or push_many.lua, per job) returns it:
    its due time ``"s.mmm"``, or ``[topic, due]`` of the job holding a taken id
    (due ``""`` when that job does not wait any more)."""
    if not isinstance(reply, (list, tuple)):
        return parse_due(reply, script)
    if len(reply) != 2:
        raise ProtocolError(f"{script} returned {reply!r:.200}, expected a due time or [topic, due]")
    topic, due = reply
    return Taken(job_id, _text("topic", topic), None if due in (b"", "") else parse_due(due, script))


def parse_push(call: ScriptCall, reply: object) -> float:
    """push.lua's reply to ``call`` as the due time; :class:`IdTakenError` when the id was taken."""
    pushed = parse_pushed(reply, str(call.args[0]))
    if isinstance(pushed, Taken):
        raise IdTakenError([pushed], [None])
    return pushed


def parse_dues(reply: object, call: ScriptCall) -> List[Union[float, Taken]]:
    """push_many.lua's reply to ``call``: one due time (or :class:`Taken`) per job."""
    ids = push_many_ids(call)
    if not isinstance(reply, (list, tuple)) or len(reply) != len(ids):
        raise ProtocolError(f"push_many.lua returned {reply!r:.200}, expected a list of {len(ids)} due times")
    return [parse_pushed(r, i, "push_many.lua") for r, i in zip(reply, ids)]


def parse_push_many(calls: Sequence[ScriptCall], replies: object) -> List[Union[float, Taken]]:
    """The outcomes of a ``push_many`` pipeline: SCRIPT LOAD's reply, then one list per call."""
    if not isinstance(replies, (list, tuple)) or len(replies) != len(calls) + 1:
        raise ProtocolError(f"expected {len(calls) + 1} replies from a push_many pipeline, got {replies!r:.200}")
    dues: List[Union[float, Taken]] = []
    for call, reply in zip(calls, replies[1:]):
        dues.extend(parse_dues(reply, call))
    return dues


def pushed_all(outcomes: Sequence[Union[float, Taken]]) -> List[float]:
    """The due times of a whole ``push_many``; :class:`IdTakenError` if any id was taken."""
    taken = [o for o in outcomes if isinstance(o, Taken)]
    if taken:
        raise IdTakenError(taken, [None if isinstance(o, Taken) else o for o in outcomes])
    return [o for o in outcomes if not isinstance(o, Taken)]


def parse_message(reply: object) -> Optional[Message]:
    """pop.lua's / take.lua's reply: ``[id, topic, body]`` or nil."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 3:
        raise ProtocolError(f"expected [id, topic, body] or nil, got {reply!r:.200}")
    job_id, topic, body = reply
    return Message(id=_text("id", job_id), topic=_text("topic", topic), body=_body(body))


def parse_removed(reply: object, script: str = "remove.lua") -> bool:
    """remove.lua's (or ack.lua's) reply: 1 or 0."""
    if isinstance(reply, int) and not isinstance(reply, bool) and reply in (0, 1):
        return reply == 1
    raise ProtocolError(f"{script} returned {reply!r}, expected 0 or 1")


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


def parse_reserved(reply: object) -> Optional[ReservedMessage]:
    """reserve.lua's reply: ``[id, topic, body, attempts, max_attempts, receipt, deadline]`` or nil."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 7:
        raise ProtocolError(
            f"expected [id, topic, body, attempts, max_attempts, receipt, deadline] or nil, got {reply!r:.200}"
        )
    job_id, topic, body, attempts, max_attempts, receipt, deadline = reply
    return ReservedMessage(
        id=_text("id", job_id),
        topic=_text("topic", topic),
        body=_body(body),
        attempts=_int("attempts", attempts),
        max_attempts=_int("max_attempts", max_attempts),
        receipt=_text("receipt", receipt),
        deadline=parse_due(deadline, "reserve.lua", "deadline"),
    )


def parse_ended(reply: object) -> bool:
    """release.lua's reply in "held" mode: a due time or ``"dead"`` (the
    reservation was held and is ended) or nil (it was not)."""
    if reply is None:
        return False
    if _text("release result", reply) == "dead":
        return True
    parse_due(reply, "release.lua")
    return True


def parse_rescheduled(reply: object) -> Optional[float]:
    """reschedule.lua's reply: the new due time, or nil when the job is not waiting."""
    if reply is None:
        return None
    return parse_due(reply, "reschedule.lua")


def parse_touched(reply: object) -> Optional[float]:
    """touch.lua's reply: the new deadline, or nil when the reservation was not held."""
    if reply is None:
        return None
    return parse_due(reply, "touch.lua", "deadline")


def parse_dead_letters(reply: object) -> List[DeadLetter]:
    """dead.lua's ``list`` reply: ``[id, topic, body, attempts, reason, dead_at]`` per entry."""
    if not isinstance(reply, (list, tuple)):
        raise ProtocolError(f"dead.lua returned {reply!r:.200}, expected a list of dead letters")
    out = []
    for entry in reply:
        if not isinstance(entry, (list, tuple)) or len(entry) != 6:
            raise ProtocolError(f"expected [id, topic, body, attempts, reason, dead_at], got {entry!r:.200}")
        job_id, topic, body, attempts, reason, dead_at = entry
        # dead.lua sends "" for a dead_at the bucket lacks (only a bucket
        # written by hand): 0.0 then, rather than failing the whole listing.
        when = 0.0 if dead_at in (b"", "") else parse_due(dead_at, "dead.lua", "dead_at")
        out.append(
            DeadLetter(
                id=_text("id", job_id),
                topic=_text("topic", topic),
                body=_body(body),
                attempts=_int("attempts", attempts),
                reason=_text("reason", reason),
                dead_at=when,
            )
        )
    return out


def parse_dead_taken(reply: object) -> Tuple[int, int]:
    """dead.lua's ``requeue`` / ``purge`` reply: ``(done, taken)``."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError(f"dead.lua returned {reply!r:.200}, expected [done, taken]")
    return _int("done", reply[0]), _int("taken", reply[1])


def parse_blmove(reply: object) -> bool:
    """BLMOVE's reply: the id it moved back in place (True: the queue holds
    something, for reserve.lua to judge) or nil on timeout (False)."""
    if reply is None:
        return False
    if not isinstance(reply, (bytes, str)):
        raise ProtocolError(f"expected an id or nil from BLMOVE, got {reply!r:.200}")
    return True


def parse_brpop(reply: object) -> Optional[str]:
    """BRPOP's reply ``[key, id]`` (or nil on timeout) as the id."""
    if reply is None:
        return None
    if not isinstance(reply, (list, tuple)) or len(reply) != 2:
        raise ProtocolError(f"expected [key, id] from BRPOP, got {reply!r:.200}")
    return _text("id", reply[1])


# --------------------------------------------------------------------------
# clients and errors


_Client = TypeVar("_Client")


def open_client(
    from_url: Callable[..., _Client],
    retry: object,
    url: object,
    password: Optional[str],
    tls_files: Tuple[object, object, object],
) -> Tuple[_Client, List[str]]:
    """Build a redis-py client, sync or asyncio (``from_url`` says which), as
    both Delayer clients do. Returns it with the secrets to scrub from errors.
    The caller applies username/password overrides with :func:`set_credentials`."""
    checked = redis_url(url)
    secrets = [s for s in (url_secret(checked), password) if isinstance(s, str) and s]
    options = tls_options(checked, *tls_files)
    try:
        client = from_url(checked, **options, **client_options(retry))
    except (ValueError, TypeError, RedisError) as e:
        raise ConfigError(f"invalid Redis URL: {scrub(str(e), secrets)}") from None
    return client, secrets


def reject_url_options(*options: object) -> None:
    """``client=`` brings its own connection: url-only options make no sense with it."""
    if any(o is not None for o in options):
        raise InvalidArgument("username, password and tls_* are options of url=, not of client=")


def client_options(retry: object) -> Dict[str, Any]:
    """Options for clients the SDK creates: fail fast, with ``retry`` (no retries)."""
    return {"socket_connect_timeout": CONNECT_TIMEOUT, "decode_responses": False, "retry": retry}


def redis_url(url: object) -> str:
    """``url`` as redis-py takes it: ``redis+unix://`` becomes ``unix://``."""
    if not isinstance(url, str):
        raise ConfigError(f"url must be a str, not {type(url).__name__}")
    if url.startswith("redis+unix://"):
        return "unix://" + url[len("redis+unix://") :]
    return url


def tcp_url(host: str, port: int, database: int) -> str:
    """A ``redis://`` URL for host, port and database (no credentials)."""
    where = f"[{host}]" if ":" in host else quote(host, safe="")
    return f"redis://{where}:{port}/{database}"


def _readable(name: str, value: object) -> Optional[str]:
    """A certificate file option as a path that can be read, or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, (str, PathLike)):
        raise ConfigError(f"{name} must be a path, not {type(value).__name__}")
    path = fspath(value)
    if not isinstance(path, str):
        raise ConfigError(f"{name} must be a str path, not {type(path).__name__}")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise ConfigError(f"{name}: cannot read {path}: {e.strerror or e}") from None
    return path


def tls_options(url: str, ca_file: object, cert_file: object, key_file: object) -> Dict[str, Any]:
    """redis-py's ``ssl_*`` options for the certificate files (checked readable).

    As in the Rust SDK, the files matter only for a ``rediss://`` URL; for
    other URLs they are checked but not used.
    """
    ca = _readable("tls_ca_file", ca_file)
    cert = _readable("tls_cert_file", cert_file)
    key = _readable("tls_key_file", key_file)
    if cert is not None and key is None:
        raise ConfigError("tls_cert_file needs tls_key_file too")
    if key is not None and cert is None:
        raise ConfigError("tls_key_file needs tls_cert_file too")
    if not url.startswith("rediss://"):
        return {}
    options: Dict[str, Any] = {}
    if ca is not None:
        options["ssl_ca_certs"] = ca
    if cert is not None and key is not None:
        options["ssl_certfile"] = cert
        options["ssl_keyfile"] = key
    return options


def set_credentials(
    connection_kwargs: MutableMapping[str, Any], username: Optional[str], password: Optional[str]
) -> None:
    """Let ``username`` / ``password``, when given, override the URL's.

    As with redis-rs, a user name without any password is not sent (AUTH
    needs a password).
    """
    for name, value in (("username", username), ("password", password)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a str, not {type(value).__name__}")
        if value:
            connection_kwargs[name] = value
    if not connection_kwargs.get("password"):
        connection_kwargs.pop("username", None)


def url_secret(url: str) -> Optional[str]:
    """The password in a Redis URL, if any, so messages can hide it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def describe(connection_kwargs: Mapping[str, Any]) -> Tuple[str, List[str]]:
    """``(where, secrets)`` of a client: ``host:port`` (or the socket path) and its password."""
    path = connection_kwargs.get("path")
    if path:
        where = f"unix:{path}"
    else:
        where = f"{connection_kwargs.get('host', '127.0.0.1')}:{connection_kwargs.get('port', 6379)}"
    password = connection_kwargs.get("password")
    secrets = [password] if isinstance(password, str) and password else []
    return where, secrets


def check_binary(connection_kwargs: Mapping[str, Any]) -> None:
    """Refuse a client that decodes replies: bodies are bytes, not text."""
    if connection_kwargs.get("decode_responses"):
        raise InvalidArgument("the Redis client must be created with decode_responses=False (bodies are bytes)")


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def translate(exc: RedisError, where: str, secrets: Sequence[str]) -> DelayerError:
    """The SDK's error for a redis-py error."""
    detail = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, AuthenticationError):
        return ConnectionFailed(f"Redis at {where} refused the credentials: {detail}")
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
        return ConnectionFailed(f"cannot reach Redis at {where}: {detail}")
    if isinstance(exc, ResponseError):
        return ProtocolError(f"Redis at {where} answered with an error: {detail}")
    return ProtocolError(f"unexpected reply from Redis at {where}: {detail}")


class Guard:
    """A context manager turning redis-py errors into the SDK's (sync or async code)."""

    __slots__ = ("where", "secrets")

    def __init__(self, where: str, secrets: Sequence[str]) -> None:
        self.where = where
        self.secrets = list(secrets)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if isinstance(exc, RedisError):
            raise translate(exc, self.where, self.secrets) from exc
