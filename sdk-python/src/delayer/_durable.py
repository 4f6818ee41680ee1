"""Durable pushes: ``WAIT 1 <timeout>`` after the write, on its connection.

Redis replicates asynchronously: a push the master acknowledged can be lost
when the master dies before its replica has it (bench/RESULTS.md measures
how many per failover). With ``durable=...`` a push's script and a ``WAIT``
go in one pipeline, so on one connection, and the push raises
:class:`~delayer.NotReplicatedError` when no replica acknowledged the write
in time. This module wraps an operation of :mod:`delayer._ops` and says
what to queue and how the replies split; the clients run the pipeline.
"""

from __future__ import annotations

import hashlib

from typing import Any, Generator, List, NamedTuple, Optional, Tuple, Union

from . import _ops, scripts
from ._calls import ScriptCall
from .errors import InvalidArgument, NotReplicatedError

#: The wait of ``durable=True``, in seconds.
DEFAULT_TIMEOUT = 1.0


class Durable(NamedTuple):
    """A push step (a script call, a pipeline of them, or a per-topic push
    with its index write) followed by WAIT."""

    step: Union[ScriptCall, _ops.Pipeline, _ops.Early]  # never _ops.Commands: see _wrapped
    timeout_ms: int


def timeout_of(durable: object) -> float:
    """``durable=`` as seconds: True is :data:`DEFAULT_TIMEOUT`, a number is itself."""
    if durable is True:
        return DEFAULT_TIMEOUT
    if isinstance(durable, bool) or not isinstance(durable, (int, float)) or not 0 < durable <= 3600:
        raise InvalidArgument(f"durable must be True or a number of seconds (0, 3600], not {durable!r}")
    return float(durable)


def wrap(op: "_ops.Op[Any]", durable: object) -> "_ops.Op[Any]":
    """``op`` with each of its steps followed by WAIT; raises
    NotReplicatedError (with what ``op`` returned) when a WAIT saw no replica."""
    timeout = timeout_of(durable)
    return _wrapped(op, timeout)


def _wrapped(op: "_ops.Op[Any]", timeout: float) -> Generator[Any, Any, Any]:
    least = None
    try:
        step = next(op)
        while True:
            if isinstance(step, _ops.Wait):  # pushes never wait; nothing to make durable
                raise TypeError("a blocking wait cannot be made durable")
            if isinstance(step, _ops.Commands):  # the index write: a hint, rebuilt by the server
                step = op.send((yield step))
                continue
            reply, acked = yield Durable(step, max(1, round(timeout * 1000)))
            least = acked if least is None else min(least, acked)
            step = op.send(reply)
    except StopIteration as done:
        result = done.value
    if least is not None and least < 1:
        raise NotReplicatedError(result, timeout)
    return result


def queue(pipe: Any, step: Durable, loaded: Any) -> None:
    """Queue ``step``'s commands on a non-transactional pipeline: SCRIPT LOAD
    of each script (a no-op unless Redis lost its cache), the calls, WAIT 1.
    ``loaded`` maps script names to redis-py Script objects (their sha)."""
    calls = calls_of(step)
    for name in dict.fromkeys(c.script for c in calls):
        pipe.script_load(scripts.source(name))
    for call in calls:
        pipe.evalsha(loaded[call.script].sha, len(call.keys), *call.keys, *call.args)
    if isinstance(step.step, _ops.Early):  # the index write, before WAIT: one pipeline still
        for command in step.step.commands:
            pipe.execute_command(*command)
    pipe.execute_command("WAIT", 1, step.timeout_ms)


def tolerant(step: Durable) -> bool:
    """Whether :func:`queue`'s pipeline is read with its error replies in
    the list: a per-topic push, whose index write is a hint (the operation
    raises its script's error itself, :func:`delayer._ops.heard` the rest)."""
    return isinstance(step.step, _ops.Early)


def calls_of(step: Durable) -> List[ScriptCall]:
    """The script calls of ``step``, in order."""
    if isinstance(step.step, _ops.Pipeline):
        return list(step.step.calls)
    return [step.step.call] if isinstance(step.step, _ops.Early) else [step.step]


def cluster_parts(step: Durable) -> Optional[Tuple[Durable, "_ops.Commands"]]:
    """On a Redis Cluster, a durable per-topic push (``step`` of an
    :class:`~delayer._ops.Early`) is its script call made durable on its
    node, then the index write as any other (other slots); None for any
    other step. The client answers ``[the call's reply, *the commands'
    replies]`` and the call's replica count, as :func:`split` would."""
    if not isinstance(step.step, _ops.Early):
        return None
    return Durable(step.step.call, step.timeout_ms), _ops.Commands(step.step.commands, tolerate=True)


def per_node(step: Durable, indexes: List[int]) -> Durable:
    """The part of ``step`` whose calls are ``indexes``, for one node of a
    Redis Cluster (each node's write gets its own WAIT, on its connection)."""
    calls = calls_of(step)
    return Durable(_ops.Pipeline([calls[k] for k in indexes]), step.timeout_ms)


def joined(step: Durable, replies: List[Any], acked: int) -> Tuple[Any, int]:
    """What :func:`split` would answer for ``step``, from each call's reply
    (in order) and the fewest replicas any node's WAIT counted."""
    if isinstance(step.step, _ops.Pipeline):
        # the SCRIPT LOADs' replies (their sha1), which no operation reads
        return [hashlib.sha1(scripts.source(name)).hexdigest() for name in step.step.scripts] + replies, acked
    return replies[0], acked


def split(step: Durable, replies: List[Any]) -> Tuple[Any, int]:
    """The replies of :func:`queue`'s pipeline as (what the step's own reply
    would have been, how many replicas have the write)."""
    acked = int(replies[-1])
    if isinstance(step.step, _ops.Pipeline):
        return replies[:-1], acked
    if isinstance(step.step, _ops.Early):  # after its one SCRIPT LOAD: the call's reply, the commands'
        return list(replies[1:-1]), acked
    return replies[-2], acked
