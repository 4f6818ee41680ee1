"""Every call builder against its script's header, with no Redis: the header
(KEYS and ARGV stated once, in lua/) is the contract, and the builders are
this SDK's only source of script calls. The conformance suite checks the same
on the wire (conformance/test_conformance_contract.py); this catches a drift
at unit level, before any process starts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from delayer import Job, Keys, _calls, scripts
from delayer._calls import ScriptCall
from delayer.inspect import job_op, stats_op

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
        *_calls.push_many_batches(k, [Job("t", "a", 1)]).calls,
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
        _calls.flow_call(k, "t", "pause"),
        *by_ids,
        next(stats),  # type: ignore[arg-type]
        next(job_op(k, "t", "a")),  # type: ignore[arg-type]
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


def test_each_layout_runs_its_own_scripts() -> None:
    # issue 21: one shape per script; keys.py alone picks a layout's
    classic = {c.script for c in calls()}
    assert {"push", "push_many", "remove", "dead", "release", "flow"} <= classic
    assert not any(s.endswith("_topic") for s in classic)
    assert {"push_topic", "push_many_topic", "remove_topic", "dead_topic", "release_topic", "flow_topic"} <= {
        c.script for c in topic_calls()}
    release = _calls.release_call(Keys(PREFIX), "a", 1, "1")
    assert release.keys[3] == PREFIX + "scheduled_count"
    assert release.args[:4] == [PREFIX + "job_bucket:", PREFIX + "dead:", 1000, "held"]


def test_every_script_is_covered() -> None:
    assert {c.script for c in calls() + topic_calls()} >= set(scripts.NAMES)


# -- the per-topic layout (PROTOCOL.md, "Operations in the per-topic layout") --

#: The table of PROTOCOL.md: each classic name of a header, as the topic's own
#: (None: the layout has none; no script a per-topic call runs names it).
PER_TOPIC = {
    "<prefix>job_pool": "{t}:pool",
    "<prefix>job_bucket:<id>": "{t}:job:a",
    "<prefix>ready_queue:<topic>": "{t}:ready",
    "<prefix>malformed": "{t}:malformed",
    "<prefix>reserved": "{t}:reserved",
    "<prefix>receipt_seq": "{t}:receipt_seq",
    "<prefix>dead:<topic>": "{t}:dead",
    "<prefix>scheduled_count": None,
    "<prefix>outcomes": "{t}:outcomes",
    "<prefix>flow:<topic>": "{t}:flow",
    "<prefix>flow_gate:<topic>": "{t}:gate",
    # flow_topic.lua's header names the per-topic keys themselves
    "<prefix>{<topic>}:flow": "{t}:flow",
    "<prefix>{<topic>}:gate": "{t}:gate",
    "<prefix>{<topic>}:pool": "{t}:pool",
}


def topic_calls() -> List[ScriptCall]:
    from delayer import ReservedMessage
    from delayer.inspect import scan_op

    k = Keys(PREFIX, "topic")
    held = ReservedMessage("a", "t", b"", 1, 3, "1", 0.0)
    every, _ = _calls.dead_take_calls(k, "purge", "t", None)
    assert every is not None
    return [
        _calls.push_call(k, "t", "a", 1, b"x", 60, 3, None),
        *_calls.push_many_batches(k, [Job("t", "a", 1)]).calls,
        _calls.pop_call(k, "t"),
        _calls.take_call(k, "t", "a"),
        _calls.remove_call(k, "a", "t"),
        _calls.reserve_call(k, "t", 30),
        *_calls.reserve_many_calls(k, "t", 30, 5, [held]).calls,
        _calls.ack_call(k, held, None),
        _calls.touch_call(k, "a", 30, "1", "t"),
        _calls.release_call(k, held, 1, None, "boom"),
        _calls.bury_call(k, "a", None, None, "t"),
        _calls.reschedule_call(k, "a", 1, "t"),
        _calls.dead_list_call(k, "t", 0, 10),
        _calls.flow_call(k, "t", "resume"),
        every,
        next(job_op(k, "t", "a")),  # type: ignore[arg-type]
        next(scan_op(k, False, "t", 0, 10)),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("call", topic_calls(), ids=lambda c: c.script)
def test_per_topic_calls_use_the_topics_names_in_one_slot(call: ScriptCall) -> None:
    header = header_keys(call.script)
    # the layout's own scripts where the work differs (issue 21: one shape per script)
    assert call.script not in ("push", "push_many", "remove", "dead", "release", "flow"), call.script
    if call.script == "release_topic":
        # KEYS[4] is the topic's dead-letter list; no dead-letter prefix: ARGV[2] is the action
        assert call.keys == [PREFIX + "{t}:reserved", PREFIX + "{t}:pool", PREFIX + "{t}:malformed",
                             PREFIX + "{t}:dead", PREFIX + "{t}:outcomes"]
        assert call.args[0] == PREFIX + "{t}:job:" and call.args[1] in (1000, "bury") and call.args[2] == "held"
    elif call.script == "list":
        assert call.keys == [PREFIX + "{t}:pool"] and call.args[0] == PREFIX + "{t}:job:"
    else:
        expected = [PER_TOPIC[pattern] for pattern, _ in header]
        assert call.keys == [PREFIX + e for e in expected if e is not None], call.script
    # every key in the topic's hash slot; every name-building prefix the topic's
    assert all(key.startswith(PREFIX + "{t}:") for key in call.keys)
    for arg in call.args:
        if isinstance(arg, str) and arg.startswith(PREFIX) and arg != PREFIX + "wake":
            assert arg.startswith(PREFIX + "{t}:"), (call.script, arg)
    # the wake channel is a channel, not a key: in both layouts, as the scripts announce on it
    assert all(arg == PREFIX + "wake" for arg in call.args if isinstance(arg, str) and arg.endswith("wake"))


def test_per_topic_calls_pass_the_wake_channel() -> None:
    by_script = {c.script: c for c in topic_calls()}
    wake = PREFIX + "wake"
    assert by_script["push_topic"].args[10] == wake
    assert by_script["push_many_topic"].args[2] == wake
    assert by_script["release_topic"].args[5] == wake
    assert by_script["reschedule"].args[2] == wake
    assert by_script["reserve"].args[-1] == wake and by_script["touch"].args[3] == wake


# -- one shape per script (issue 21): every ARGV the header lists, "" for none --

ARGV_LINE = re.compile(r"^-- ARGV\[(\d+)\]\s")


def header_argc(name: str) -> int:
    """The last ARGV[n] the header lists as its own line."""
    n = 0
    for line in (PKG_LUA / f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        m = ARGV_LINE.match(line)
        if m:
            n = int(m.group(1))
    return n


def argc_problem(call: ScriptCall) -> Optional[str]:
    """What is wrong with the call's ARGV count (None: its one shape)."""
    n, args = len(call.args), call.args
    if call.script in ("release", "release_topic"):
        head = 2 if call.script == "release" else 1  # release_topic takes no dead-letter prefix
        want = head + {"held": 6, "expired": 3}[str(args[head + 1])]
        return None if n == want else f"{n} arguments; {args[head + 1]} takes {want}"
    if call.script == "reserve":  # ARGV[1..3], the pairs (batch mode), the wake channel last
        if args[2] == "":
            return None if n == 4 else f"{n} arguments; one job takes 4"
        return None if n >= 4 and (n - 4) % 2 == 0 else f"{n} arguments: not 3 + pairs + the channel"
    if call.script in ("push_many", "push_many_topic"):
        return None if n > 3 and (n - 3) % 10 == 0 else f"{n} arguments: not 3 + ten per job"
    if call.script in ("dead", "dead_topic", "list"):
        return None  # a mode's count (dead) or the optional mode (list): conformance checks them
    want = header_argc(call.script)
    return None if n == want else f"{n} arguments; the header lists {want}"


def test_every_call_sends_every_argv_its_header_lists() -> None:
    k = Keys(PREFIX)
    more = [
        _calls.push_call(k, "t", "a", 1, b"x", 60),  # no retry settings, no trace: "" each
        _calls.release_call(k, "a", 1, "1"),  # no error text: ARGV[8] ""
        _calls.bury_call(k, "a", None),
        *_calls.reserve_many_calls(k, "t", 30, 5, ["a", ("b", "2")]).calls,
        *_calls.reserve_many_calls(k, "t", 30, 0, ["a"]).calls,
    ]
    for call in calls() + topic_calls() + more:
        assert argc_problem(call) is None, (call.script, argc_problem(call), call.args)
    # The check itself fails a short call.
    short = _calls.release_call(k, "a", 1, "1")
    assert argc_problem(ScriptCall(short.script, short.keys, short.args[:7])) is not None


def test_hand_out_calls_send_the_topics_flow_keys() -> None:
    # design 23 §3.1: pop, take and reserve read the flow hash and clear the gate (header order)
    for k, flow, gate, ready in ((Keys(PREFIX), "flow:t", "flow_gate:t", "ready_queue:t"),
                                 (Keys(PREFIX, "topic"), "{t}:flow", "{t}:gate", "{t}:ready")):
        pop, take, one = _calls.pop_call(k, "t"), _calls.take_call(k, "t", "a"), _calls.reserve_call(k, "t", 30)
        many = _calls.reserve_many_calls(k, "t", 30, 5, []).calls[0]
        assert pop.keys[4:] == [PREFIX + flow, PREFIX + gate]
        assert take.keys[4:] == [PREFIX + ready, PREFIX + flow, PREFIX + gate]
        assert one.keys[6:] == many.keys[6:] == [PREFIX + flow, PREFIX + gate]
        assert len(pop.keys) == len(header_keys("pop")) and len(take.keys) == len(header_keys("take"))
        assert len(one.keys) == len(header_keys("reserve"))


def test_the_flow_pool_prefix_is_passed_where_a_held_job_may_be() -> None:
    """A paused topic's held jobs (issue 23): in the classic layout, in
    <prefix>flow_pool:<topic>, which remove, reschedule and lookup are told
    of; per topic they stay in the pool, so the prefix is "" (remove_topic.lua
    takes none)."""
    from delayer.inspect import job_op

    k = Keys(PREFIX)
    assert k.flow_pool("t") == PREFIX + "flow_pool:t" and k.flow_pool_prefix == PREFIX + "flow_pool:"
    assert k.flow_topics == PREFIX + "flow_topics"
    assert _calls.remove_call(k, "a").args == ["a", PREFIX + "flow_pool:"]
    assert _calls.reschedule_call(k, "a", 1).args[3] == PREFIX + "flow_pool:"
    assert next(job_op(k, "t", "a")).args == ["a", "t", PREFIX + "flow_pool:"]  # type: ignore[arg-type]
    t = Keys(PREFIX, "topic")
    assert t.names("t").flow_pool_prefix == ""
    assert _calls.remove_call(t, "a", "t").args == ["a"]
    assert _calls.reschedule_call(t, "a", 1, "t").args[3] == ""
    assert next(job_op(t, "t", "a")).args == ["a", "t", ""]  # type: ignore[arg-type]


def test_the_inspecting_calls_read_the_topics_flow() -> None:
    """Issue 23: lookup.lua reads the job's topic's flow hash (KEYS[4]);
    stats.lua the classic flow_topics (KEYS[5]), each topic's flow hash and
    flow pool (ARGV[5], ARGV[6]); the per-topic stats HGET and ZCOUNT per topic
    (test_inspect_pause.py)."""
    classic, per_topic = Keys(PREFIX), Keys(PREFIX, "topic")
    lookup = next(job_op(classic, "t", "a"))
    assert lookup == ScriptCall("lookup", [PREFIX + "job_bucket:a", PREFIX + "job_pool", PREFIX + "reserved",
                                           PREFIX + "flow:t"], ["a", "t", PREFIX + "flow_pool:"])
    lookup = next(job_op(per_topic, "t", "a"))
    assert lookup == ScriptCall("lookup", [PREFIX + "{t}:job:a", PREFIX + "{t}:pool", PREFIX + "{t}:reserved",
                                           PREFIX + "{t}:flow"], ["a", "t", ""])
    assert len(lookup.keys) == len(header_keys("lookup"))  # type: ignore[union-attr]
    stats = next(stats_op(classic))
    assert stats == ScriptCall("stats", [PREFIX + "topics", PREFIX + "scheduled_count", PREFIX + "job_pool",
                                         PREFIX + "reserved", PREFIX + "flow_topics"],
                               [PREFIX + "ready_queue:", PREFIX + "dead:", PREFIX + "job_bucket:", 1000,
                                PREFIX + "flow:", PREFIX + "flow_pool:"])
    assert len(stats.keys) == len(header_keys("stats"))  # type: ignore[union-attr]
    assert classic.flow_prefix + "t" == classic.flow("t")


def test_flow_calls_send_the_headers_keys_and_arguments() -> None:
    # flow.lua: flow hash, gate, flow_topics, flow pool; flow_topic.lua: the topic's flow, gate, pool
    classic = _calls.flow_call(Keys(PREFIX), "t", "pause")
    assert classic == ScriptCall("flow", [PREFIX + "flow:t", PREFIX + "flow_gate:t", PREFIX + "flow_topics",
                                          PREFIX + "flow_pool:t"], ["t", "pause", PREFIX + "wake", "", ""])
    per_topic = _calls.flow_call(Keys(PREFIX, "topic"), "t", "get")
    assert per_topic == ScriptCall("flow_topic", [PREFIX + "{t}:flow", PREFIX + "{t}:gate", PREFIX + "{t}:pool"],
                                   ["t", "get", PREFIX + "wake", "", ""])
    # ARGV[4] per_second, ARGV[5] burst: "limit" only ("" = none / the script's default burst)
    assert _calls.flow_call(Keys(PREFIX), "t", "limit", 2.5, 4).args == ["t", "limit", PREFIX + "wake", "2.5", "4"]
    assert [len(c.keys) for c in (classic, per_topic)] == [len(header_keys("flow")), len(header_keys("flow_topic"))]
    with pytest.raises(ValueError):
        _calls.flow_call(Keys(PREFIX), "t", "stop")  # an action no script takes: the SDK's own mistake
