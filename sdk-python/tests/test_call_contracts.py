"""Every call builder against its script's header, with no Redis: the header
(KEYS and ARGV stated once, in lua/) is the contract, and the builders are
this SDK's only source of script calls. The conformance suite checks the same
on the wire (conformance/test_conformance_contract.py); this catches a drift
at unit level, before any process starts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

import pytest

from delayer import Job, Keys, _calls, scripts
from delayer._calls import ScriptCall
from delayer.inspect import stats_op

PKG_LUA = Path(__file__).resolve().parents[1] / "src" / "delayer" / "lua"
PREFIX = "shop:d:"
KEYS_LINE = re.compile(r"^-- KEYS\[(\d+)\]\s+(.*)$")


def header_keys(name: str) -> List[Tuple[str, bool]]:
    """The header's KEYS: (the name it gives, optional) per key, in order."""
    out = []
    for line in (PKG_LUA / f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        m = KEYS_LINE.match(line)
        if m:
            assert int(m.group(1)) == len(out) + 1
            named = re.search(r"<prefix>\S*", m.group(2))
            assert named, line
            out.append((named.group(0), "optional" in m.group(2)))
    return out


def key_ok(pattern: str, key: str) -> bool:
    rx = re.sub(r"<[a-z_]+>", ".+", re.escape(pattern).replace("<prefix>", re.escape(PREFIX), 1))
    return re.fullmatch(rx, key) is not None


def calls() -> List[ScriptCall]:
    k = Keys(PREFIX)
    every, by_ids = _calls.dead_take_calls(k, "requeue", "t", ["a"])
    assert every is None
    stats = stats_op(k)
    return [
        _calls.push_call(k, "t", "a", 1, b"x", 60, 3, None),
        *_calls.push_many_calls(k, [Job("t", "a", 1)]),
        _calls.pop_call(k, "t"),
        _calls.take_call(k, "t", "a"),
        _calls.remove_call(k, "a"),
        _calls.reserve_call(k, "t", 30),
        *_calls.reserve_many_calls(k, "t", 30, 5, []).calls,
        _calls.ack_call(k, "a", "1"),
        _calls.touch_call(k, "a", 30, "1"),
        _calls.release_call(k, "a", 1, "1", "boom"),
        _calls.bury_call(k, "a", None),
        _calls.reschedule_call(k, "a", 1),
        _calls.dead_list_call(k, "t", 0, 10),
        *by_ids,
        next(stats),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("call", calls(), ids=lambda c: c.script)
def test_keys_are_the_headers(call: ScriptCall) -> None:
    header = header_keys(call.script)
    required = len([opt for _, opt in header if not opt])
    assert required <= len(call.keys) <= len(header), (call.script, call.keys)
    for (pattern, _), key in zip(header, call.keys):
        assert key_ok(pattern, key), f"{call.script}.lua: key {key!r} is not {pattern}"


def test_no_call_hands_a_script_the_bare_prefix() -> None:
    for call in calls():
        assert PREFIX not in call.args, f"{call.script}.lua gets the bare prefix to build names from"


def test_every_script_is_covered() -> None:
    assert {c.script for c in calls()} >= set(scripts.NAMES) - {"lookup", "list"}
