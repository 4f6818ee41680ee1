"""How every step of an operation reaches Redis: the SDK's one EVALSHA /
NOSCRIPT / WAIT path, for the sync and asyncio clients alike.

An operation (:mod:`delayer._ops`, :mod:`delayer.inspect`) yields steps in
protocol terms; :func:`lower` makes each a :class:`Send` (one pipeline) or
a :class:`Wait`, which is all a client sends. A call Redis answers NOSCRIPT
(it lost its scripts: a restart, a failover) goes once more by EVAL; a
durable push's ``WAIT 1`` rides on its calls' connection.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Generator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from redis.exceptions import NoScriptError

from . import scripts
from ._calls import Arg, ScriptCall
from ._names import ENCODING, name_bytes
from .errors import InvalidArgument, NotReplicatedError, ProtocolError

T = TypeVar("T")

#: The wait of ``durable=True``, in seconds.
DEFAULT_TIMEOUT = 1.0

Command = Tuple[Arg, ...]


class Pipeline(NamedTuple):
    """Script calls in one round trip; the reply is their replies' list (the first error raised)."""

    calls: Sequence[ScriptCall]


class Commands(NamedTuple):
    """Plain commands in one round trip; the reply is their replies' list
    (with ``tolerate``, an error reply is in it instead of raised)."""

    commands: Sequence[Command]
    tolerate: bool = False


class Wait(NamedTuple):
    """A blocking wait on a waits' connection (:mod:`delayer._waits`): ``"BRPOP"``
    (bpop takes the id), ``"BLMOVE"`` of the queue onto itself (breserve takes
    nothing) or ``"BRPOPLPUSH"`` of a paused topic's gate onto itself (takes nothing)."""

    command: str
    queue: Union[str, bytes]
    seconds: float


class Send(NamedTuple):
    """What a client sends: ``commands`` in one pipeline, then ``WAIT 1 wait_ms``
    when ``wait_ms`` (on a cluster, on each master written); the reply is
    one per command (an error as its exception), then WAIT's count."""

    commands: Sequence[Command]
    wait_ms: int = 0


def with_wait(send: Send) -> List[Command]:
    """The commands a client queues for ``send``: its own, then its WAIT."""
    return [*send.commands, ("WAIT", 1, send.wait_ms)] if send.wait_ms else list(send.commands)


#: What an operation asks for next.
Step = Union[ScriptCall, Pipeline, Commands, Wait]
#: An operation: yields steps, is sent their replies, returns its result.
Op = Generator[Any, Any, T]

_SHA: Dict[str, str] = {}


def sha(script: str) -> str:
    """The SHA1 Redis names script ``script`` by."""
    found = _SHA.get(script)
    if found is None:
        found = _SHA[script] = hashlib.sha1(scripts.source(script)).hexdigest()
    return found


def arg(value: Any) -> Any:
    """``value`` as redis-py must get it: a name holding surrogate escapes as
    its bytes (redis-py encodes ``str`` strictly); anything else as it is."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode(ENCODING)
        except UnicodeEncodeError:
            return name_bytes(value)
    return value


def command(call: ScriptCall, text: bool = False) -> Command:
    """``call`` as EVALSHA, or with ``text`` as EVAL of the script's text."""
    head: Arg = scripts.source(call.script) if text else sha(call.script)
    values = (*call.keys, *call.args)
    for v in values:  # one loop, and a call per argument only when a name is not ASCII
        if isinstance(v, str) and not v.isascii():
            values = tuple(map(arg, values))
            break
    return ("EVAL" if text else "EVALSHA", head, len(call.keys), *values)


def timeout_of(durable: object) -> float:
    """``durable=`` as seconds: True is :data:`DEFAULT_TIMEOUT`, a number is itself."""
    if durable is True:
        return DEFAULT_TIMEOUT
    if isinstance(durable, bool) or not isinstance(durable, (int, float)) or not 0 < durable <= 3600:
        raise InvalidArgument(f"durable must be True or a number of seconds (0, 3600], not {durable!r}")
    return float(durable)


def _raise_first(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply


def _sent(commands: Sequence[Command], wait_ms: int) -> Generator[Send, Any, Tuple[List[Any], Optional[int]]]:
    """Send ``commands``; their replies, and WAIT's count (None without one)."""
    replies = yield Send(commands, wait_ms)
    if not isinstance(replies, (list, tuple)) or len(replies) != len(commands) + (1 if wait_ms else 0):
        raise ProtocolError(f"expected {len(commands)} replies, got {replies!r:.200}")
    if not wait_ms:
        return list(replies), None
    _raise_first(replies[-1:])
    return list(replies[:-1]), int(replies[-1])


def run(calls: Sequence[ScriptCall], wait_ms: int = 0) -> Generator[Send, Any, Tuple[List[Any], Optional[int]]]:
    """The one path of script calls: EVALSHA in one round trip, those answered
    NOSCRIPT once more by EVAL; their replies (the first error raised) and
    the fewest replicas a WAIT counted."""
    replies, least = yield from _sent([command(c) for c in calls], wait_ms)
    missing = [k for k, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        again, acked = yield from _sent([command(calls[k], text=True) for k in missing], wait_ms)
        for k, reply in zip(missing, again):
            replies[k] = reply
        least = acked if least is None or acked is None else min(least, acked)
    _raise_first(replies)
    return replies, least


def lower(op: Op[T], durable: object = False) -> Generator[Union[Send, Wait], Any, T]:
    """``op`` as a client runs it: :class:`Send` and :class:`Wait` steps; with
    ``durable`` each script step waits for a replica (NotReplicatedError if none)."""
    timeout = timeout_of(durable) if durable else 0.0
    wait_ms = max(1, round(timeout * 1000)) if durable else 0
    least: Optional[int] = None
    try:
        step = next(op)
        while True:
            if isinstance(step, Wait):
                reply: Any = yield Wait(step.command, arg(step.queue), step.seconds)
            elif isinstance(step, Commands):
                reply = (yield from _sent([tuple(map(arg, c)) for c in step.commands], 0))[0]
                if not step.tolerate:
                    _raise_first(reply)
            else:
                many = isinstance(step, Pipeline)
                replies, acked = yield from run(step.calls if many else [step], wait_ms)
                reply = replies if many else replies[0]
                if acked is not None:
                    least = acked if least is None else min(least, acked)
            step = op.send(reply)
    except StopIteration as done:
        result: T = done.value
    if least is not None and least < 1:
        raise NotReplicatedError(result, timeout)
    return result
