"""Steps as redis-py must get them: names that are not UTF-8 as their bytes.

The SDK hands out an id or topic that is not UTF-8 as a ``str`` with
surrogate escapes (:mod:`delayer._names`); redis-py encodes ``str``
arguments strictly, so such a name must reach it as bytes. :func:`step`
turns every name with surrogates in a step into its bytes, once, where the
clients send the step; every other argument is left as it is (the common
case costs one ``isascii`` per string).
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

from . import _durable, _ops
from ._calls import Arg, ScriptCall
from ._names import ENCODING, name_bytes


def _arg(value: Arg) -> Arg:
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode(ENCODING)
        except UnicodeEncodeError:
            return name_bytes(value)
    return value


def _args(values: Sequence[Any]) -> Tuple[List[Any], bool]:
    out = [_arg(v) for v in values]
    return out, any(a is not b for a, b in zip(out, values))


def _call(call: ScriptCall) -> ScriptCall:
    keys, k = _args(call.keys)
    args, a = _args(call.args)
    return ScriptCall(call.script, keys, args) if k or a else call


def _commands(commands: Sequence[Tuple[Arg, ...]]) -> Tuple[List[Tuple[Arg, ...]], bool]:
    out = []
    changed = False
    for command in commands:
        args, c = _args(command)
        out.append(tuple(args) if c else command)
        changed = changed or c
    return out, changed


def step(s: Any) -> Any:
    """``s`` (a step of :mod:`delayer._ops` or :mod:`delayer._durable`) with
    every name holding surrogate escapes as its bytes; ``s`` itself when it
    holds none."""
    if isinstance(s, ScriptCall):
        return _call(s)
    if isinstance(s, _ops.Pipeline):
        calls = [_call(c) for c in s.calls]
        return _ops.Pipeline(calls) if any(a is not b for a, b in zip(calls, s.calls)) else s
    if isinstance(s, _ops.Commands):
        commands, changed = _commands(s.commands)
        return _ops.Commands(commands, s.tolerate) if changed else s
    if isinstance(s, _ops.Early):
        call = _call(s.call)
        commands, changed = _commands(s.commands)
        return _ops.Early(call, commands) if changed or call is not s.call else s
    if isinstance(s, _ops.Wait):
        queue = _arg(s.queue)
        return s if queue is s.queue else _ops.Wait(s.command, queue, s.seconds)  # type: ignore[arg-type]
    if isinstance(s, _durable.Durable):
        inner = step(s.step)
        return s if inner is s.step else _durable.Durable(inner, s.timeout_ms)
    return s
