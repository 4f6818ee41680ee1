"""Every script call any client sends matches the script's header.

Each script in lua/ states its KEYS and ARGV in its header: that header is the
contract (docs/PROTOCOL.md, Operations). Callers build the calls in one place
per SDK (the builders), and the server builds its own; this test holds them
all to the headers, black-box: it drives every operation through each SDK's
driver while a raw MONITOR connection records every EVALSHA / EVAL that
reaches Redis (the server's move and expiry calls included), and checks each
recorded call against the header of the script its SHA names:

- the number of keys is the number of KEYS lines: every key is always sent
  (issue 21, "one shape per script"); where the layouts need different work
  the script is a pair (`<name>.lua`, `<name>_topic.lua`, built from
  lua/layouts/), and each layout calls its own: a classic script (one with
  `<prefix>scheduled_count`) in the per-topic layout, or a `_topic` one in
  the classic layout, is a drift;
- each key has the shape the header gives (`<prefix>job_pool`,
  `<prefix>job_bucket:<id>`, ...);
- the number of arguments is exactly the number the header names: an item
  with no value is sent as `""`, never left out; for the scripts that take a
  mode or a list (release, reserve, push_many, dead, migrate) the mode's own
  count, or the fixed head and then whole groups (SHAPES);
- an argument the header describes as a key prefix or a channel
  (`"<prefix>job_bucket:"`, `"<prefix>wake"`) is exactly that name.

In the per-topic layout (CONFORMANCE_LAYOUT=topic) each call carries the
topic's names in place of the shared ones (PROTOCOL.md, "Operations in the
per-topic layout"): every key of a call is of one topic (`<prefix>{<topic>}:pool`,
`<prefix>{<topic>}:job:<id>`, ...) and the bucket prefix is the topic's
(`<prefix>{<topic>}:job:`); no call carries the shared counts or the
dead-letter prefix. In both layouts every call of a script that announces (push,
push_many, release, reschedule, touch, reserve, a dead-letter requeue)
carries the wake channel `<prefix>wake`, and no client writes the index
(`<prefix>due`, `<prefix>topics`) or publishes a wake itself: the scripts
announce, the server owns the index (PROTOCOL.md, "The per-topic layout").

A builder that drifts from its script (an argument added to the script but not
sent, a key in the wrong place, a name built by hand) fails here.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from conftest import LAYOUT, PREFIX
from harness import RedisServer, new_id, ok, wait_until

LUA = Path(__file__).resolve().parents[1] / "lua"
SDKS = ["rust", "python", "php"]


@dataclass
class Contract:
    """What one script's header promises: its keys and its arguments."""

    name: str
    keys: List[Tuple[List[str], bool]] = field(default_factory=list)  # (name patterns, optional)
    argv_required: int = 0
    argv_max: Optional[int] = 0  # None: no upper bound (ARGV[n..])
    argv_names: Dict[int, str] = field(default_factory=dict)  # index -> exact name the header quotes

    @staticmethod
    def key_ok(patterns: List[str], key: str, topic: Optional[str] = None) -> bool:
        """Whether ``key`` has one of the shapes; with ``topic`` (the per-topic
        layout) the shape of that topic's name in place of each shared one."""
        for pattern in patterns:
            if topic is not None:
                translated = per_topic(pattern)
                if translated is None:
                    continue
                pattern = translated.replace("{<topic>}", "{" + topic + "}")
            rx = re.sub(r"<[a-z_]+>", ".+", re.escape(pattern).replace("<prefix>", re.escape(PREFIX), 1))
            if re.fullmatch(rx, key, re.S):
                return True
        return False


#: The per-topic layout's name for each name a header gives (PROTOCOL.md,
#: "Operations in the per-topic layout"); None: left out in that layout.
PER_TOPIC_KEYS: Dict[str, Optional[str]] = {
    "<prefix>job_pool": "<prefix>{<topic>}:pool",
    "<prefix>job_bucket:<id>": "<prefix>{<topic>}:job:<id>",
    "<prefix>ready_queue:<topic>": "<prefix>{<topic>}:ready",
    "<prefix>malformed": "<prefix>{<topic>}:malformed",
    "<prefix>reserved": "<prefix>{<topic>}:reserved",
    "<prefix>receipt_seq": "<prefix>{<topic>}:receipt_seq",
    "<prefix>dead:<topic>": "<prefix>{<topic>}:dead",
    "<prefix>scheduled_count": None,
    "<prefix>topics": None,
    "<prefix>outcomes": "<prefix>{<topic>}:outcomes",
    "<prefix>flow:<topic>": "<prefix>{<topic>}:flow",
    "<prefix>flow_gate:<topic>": "<prefix>{<topic>}:gate",
}
#: The same for the names an argument carries ("": the argument is empty).
PER_TOPIC_ARGS: Dict[str, Optional[str]] = {
    "<prefix>job_bucket:": "<prefix>{<topic>}:job:",
    "<prefix>dead:": None,
    "<prefix>wake": "<prefix>wake",
    "<prefix>ready_queue:": None,
    # The classic flow pools; per topic a held job stays in its pool, so "".
    "<prefix>flow_pool:": "",
}


#: Keys outside every topic's slot: the per-topic layout's index, and the
#: dashboard's history (either layout): a script on them alone (the
#: server's index.lua, history.lua) names no topic, and its names are as given.
INDEX_KEYS = {"<prefix>due", "<prefix>history"}


def per_topic(name: str) -> Optional[str]:
    """``name`` (a header's key shape) in the per-topic layout; None: not there."""
    if "{<topic>}" in name:
        return name
    return PER_TOPIC_KEYS[name]


TOP = re.compile(r"^--\s(KEYS|ARGV)\[(\d+)(\.\.)?\]\s+(.*)$")
NESTED_ARGV = re.compile(r"ARGV\[(\d+)(\.\.)?\]")
QUOTED_NAME = re.compile(r'"(<prefix>[a-z_:]*)"')


def parse_header(path: Path) -> Contract:
    """The header: the leading comment block, up to the first code line."""
    c = Contract(path.stem)
    blocks: List[Tuple[str, int, bool, List[str]]] = []  # (kind, n, open-ended, lines)
    for line in path.read_text().splitlines():
        if not line.startswith("--"):
            break
        m = TOP.match(line)
        if m:
            blocks.append((m.group(1), int(m.group(2)), bool(m.group(3)), [m.group(4)]))
        elif blocks and line.startswith("--    "):  # a continuation line
            blocks[-1][3].append(line[2:].strip())
        elif blocks and blocks[-1][0] != "end":  # a blank or a paragraph ends the block
            blocks.append(("end", 0, False, []))
    argv_top: List[Tuple[int, bool, bool]] = []
    for kind, n, open_ended, lines in blocks:
        text = " ".join(lines)
        # What a caller may leave out: only what the header calls optional
        # (list.lua's mode).
        optional = "optional" in text
        if kind == "KEYS":
            assert n == len(c.keys) + 1, f"{path.name}: KEYS[{n}] out of order"
            names = [x.rstrip(".,;)") for x in re.findall(r"<prefix>\S*", text)]
            assert names, f"{path.name}: KEYS[{n}] names no key"
            c.keys.append((names, optional))
        elif kind == "ARGV":
            argv_top.append((n, open_ended, optional))
            for sub, sub_open in NESTED_ARGV.findall(text):
                argv_top.append((int(sub), bool(sub_open), True))
            # A quoted name belongs to the ARGV mentioned last before it.
            owner = n
            for part in re.split(r"(ARGV\[\d+(?:\.\.)?\])", text):
                mention = NESTED_ARGV.fullmatch(part)
                if mention:
                    owner = int(mention.group(1))
                    continue
                quoted = QUOTED_NAME.search(part)
                if quoted and ("prefix" in part or "channel" in part):
                    c.argv_names.setdefault(owner, quoted.group(1))
    if argv_top:
        c.argv_required = max((n for n, _, opt in argv_top if not opt), default=0)
        c.argv_max = None if any(o for _, o, _ in argv_top) else max(n for n, _, _ in argv_top)
    return c


CONTRACTS: Dict[str, Contract] = {}
for _path in sorted(LUA.glob("*.lua")):
    CONTRACTS[hashlib.sha1(_path.read_bytes()).hexdigest()] = parse_header(_path)


def test_every_header_states_its_contract() -> None:
    by_name = {c.name: c for c in CONTRACTS.values()}
    assert set(by_name) == {p.stem for p in LUA.glob("*.lua")}
    for c in by_name.values():
        assert c.keys, f"{c.name}.lua states no KEYS"
        assert c.argv_max is None or c.argv_max >= c.argv_required
    # Spot checks that the parser reads the headers as a person would.
    assert [k for k, _ in by_name["push"].keys] == [
        ["<prefix>job_pool"], ["<prefix>job_bucket:<id>"], ["<prefix>scheduled_count"]]
    assert by_name["push"].argv_required == 12 and by_name["push"].argv_max == 12
    assert [k for k, _ in by_name["push_topic"].keys] == [["<prefix>job_pool"], ["<prefix>job_bucket:<id>"]]
    assert by_name["push_topic"].argv_required == 12 and by_name["push_topic"].argv_max == 12
    assert by_name["push_many"].keys[1] == (["<prefix>scheduled_count"], False)
    assert by_name["push_many"].argv_required == 4  # ARGV[2] "absent" is a policy, not a left-out value
    assert len(by_name["push_many_topic"].keys) == 1 and len(by_name["remove_topic"].keys) == 2
    # One shape per script: no key or argument left out (issue 21), but
    # list.lua's mode; the per-topic twin of a pair has no counts.
    for c in by_name.values():
        assert not any(optional for _, optional in c.keys), c.name
        assert c.argv_required == c.argv_max or c.name in SHAPES or c.name == "list", c.name
        if c.name.endswith("_topic"):
            assert all(k != ["<prefix>scheduled_count"] for k, _ in c.keys), c.name
    assert [optional for _, optional in by_name["ack"].keys] == [False] * 4
    assert [optional for _, optional in by_name["reserve"].keys] == [False] * 8
    # The hand-out scripts read the topic's flow control and name its gate.
    assert [k for k, _ in by_name["pop"].keys[4:]] == [["<prefix>flow:<topic>"], ["<prefix>flow_gate:<topic>"]]
    assert [k for k, _ in by_name["take"].keys[4:]] == [
        ["<prefix>ready_queue:<topic>"], ["<prefix>flow:<topic>"], ["<prefix>flow_gate:<topic>"]]
    assert [k for k, _ in by_name["reserve"].keys[6:]] == [["<prefix>flow:<topic>"], ["<prefix>flow_gate:<topic>"]]
    assert [optional for _, optional in by_name["release"].keys] == [False] * 5
    assert [optional for _, optional in by_name["migrate"].keys] == [False] * 3
    assert by_name["move"].keys[4] == (["<prefix>reserved"], False) and by_name["move"].argv_required == 6
    # The classic flow drain: the set-aside topics and their flow pools.
    assert by_name["move"].keys[5] == (["<prefix>flow_topics"], False)
    assert by_name["move_topic"].keys[2][1] is False
    assert by_name["touch"].argv_required == 4 and by_name["reschedule"].argv_required == 4
    assert by_name["push_many"].argv_max is None and by_name["push_many"].argv_names[1] == "<prefix>job_bucket:"
    assert [k for k, _ in by_name["move"].keys[2:4]] == [["<prefix>scheduled_count"], ["<prefix>topics"]]
    assert by_name["move"].argv_names == {1: "<prefix>job_bucket:", 2: "<prefix>ready_queue:", 6: "<prefix>flow_pool:"}
    assert [k for k, _ in by_name["move_flow"].keys] == [
        ["<prefix>flow_pool:<topic>"], ["<prefix>ready_queue:<topic>"], ["<prefix>flow:<topic>"], ["<prefix>job_pool"],
        ["<prefix>reserved"], ["<prefix>scheduled_count"], ["<prefix>flow_topics"]]
    assert by_name["release"].argv_names[1] == "<prefix>job_bucket:"
    assert by_name["release"].argv_names[2] == "<prefix>dead:"
    # The counts (classic), or the topic's dead list and no dead-letter prefix (per-topic).
    assert by_name["release"].keys[3] == (["<prefix>scheduled_count"], False)
    assert by_name["release_topic"].keys[3] == (["<prefix>dead:<topic>"], False)
    assert by_name["release_topic"].argv_names == {1: "<prefix>job_bucket:", 6: "<prefix>wake"}
    assert by_name["dead"].argv_required == 3 and by_name["dead"].argv_max is None
    # The flow-pool prefix (issue 23): classic remove, and reschedule / lookup in both layouts.
    assert by_name["remove"].argv_names == {2: "<prefix>flow_pool:"} and by_name["remove"].argv_max == 2
    assert by_name["remove_topic"].argv_max == 1
    assert by_name["reschedule"].argv_names == {3: "<prefix>wake", 4: "<prefix>flow_pool:"}
    assert by_name["lookup"].argv_names == {3: "<prefix>flow_pool:"} and by_name["lookup"].argv_max == 3
    # No script is handed the bare prefix to build names from: every quoted
    # name an argument carries is a per-kind prefix or the wake channel.
    for c in by_name.values():
        for name in c.argv_names.values():
            assert name != "<prefix>" and (name.endswith(":") or name == "<prefix>wake"), (c.name, name)
    assert by_name["reserve"].argv_required == 4 and by_name["reserve"].argv_max is None


# ---------------------------------------------------------------- MONITOR


_TOKEN = re.compile(r'"((?:\\.|[^"\\])*)"')


def _unquote(s: str) -> str:
    # MONITOR quotes like sdsrepr: \\ \" \n \r \t \a \b and \xNN.
    out, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "x" and i + 3 < len(s):
                out.append(chr(int(s[i + 2 : i + 4], 16)))
                i += 4
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_SOURCE = re.compile(r"^\S+ \[\d+ ([^\]]+)\]")


class RawMonitor:
    """MONITOR on a plain socket: every command clients send, as its list of
    arguments, and in ``sources`` (same order) the address of the client
    that sent it (what scripts run inside themselves is left out)."""

    def __init__(self, server: RedisServer) -> None:
        self.commands: List[List[str]] = []
        self.sources: List[str] = []
        self._sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self._sock.sendall(b"MONITOR\r\n")
        self._file = self._sock.makefile("rb")
        assert self._file.readline().strip() == b"+OK"
        self._sock.settimeout(None)
        self._thread = threading.Thread(target=self._run, daemon=True, name="raw-monitor")
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in self._file:
                line = raw.decode("latin-1").rstrip("\r\n")
                source = _SOURCE.match(line)
                if source is None or source.group(1) == "lua":
                    continue
                args = [_unquote(t) for t in _TOKEN.findall(line)]
                if args:
                    self.sources.append(source.group(1))  # first: commands[i] has its source
                    self.commands.append(args)
        except (OSError, ValueError):
            pass  # closed at the end

    @property
    def calls(self) -> List[List[str]]:
        """Each EVAL / EVALSHA."""
        return [c for c in self.commands if c[0].upper() in ("EVALSHA", "EVAL")]

    def mark(self, rds: Any) -> int:
        """Sends a marker through ``rds`` and waits until MONITOR saw it, so
        that everything sent before is recorded; the marker's position."""
        self._marks = getattr(self, "_marks", 0) + 1
        marker = ["ECHO", f"contract-mark-{self._marks}"]
        rds.echo(marker[1])
        found: List[int] = []

        def seen() -> bool:
            i = getattr(self, "_scanned", 0)
            end = len(self.commands)
            while i < end and self.commands[i] != marker:
                i += 1
            self._scanned = i
            if i < end:
                found.append(i)
            return bool(found)

        assert wait_until(seen), f"MONITOR did not show {marker}"
        return found[0]

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


TAG = re.compile(re.escape(PREFIX) + r"\{([^}]*)\}:", re.S)


def _release_shape(argv: List[str], at: int = 3) -> Optional[str]:
    # The mode is ARGV[4] (release.lua) or ARGV[3] (release_topic.lua: no dead-letter prefix).
    want = {"held": at + 5, "expired": at + 2}.get(argv[at] if len(argv) > at else "")
    if want is None:
        return f"ARGV[{at + 1}] is {argv[at : at + 1]!r}, not held or expired"
    return None if len(argv) == want else f"{len(argv)} arguments; {argv[at]} mode takes {want}"


def _reserve_shape(argv: List[str]) -> Optional[str]:
    # ARGV[1..3], the pairs to ack (batch mode only), the wake channel last.
    if len(argv) < 4:
        return f"{len(argv)} arguments; the header requires 4 (the wake channel last)"
    if argv[2] == "":
        return None if len(argv) == 4 else f"{len(argv)} arguments; one job (ARGV[3] \"\") takes 4"
    return None if (len(argv) - 4) % 2 == 0 else f"{len(argv)} arguments: not 3 + whole (id, receipt) pairs + the channel"


def _push_many_shape(argv: List[str]) -> Optional[str]:
    jobs, extra = divmod(len(argv) - 3, 10)
    return None if jobs >= 1 and extra == 0 else f"{len(argv)} arguments: not 3 + ten per job"


def _dead_shape(argv: List[str]) -> Optional[str]:
    if argv[2] == "list":
        return None if len(argv) == 5 else f"{len(argv)} arguments; list takes 5"
    return None if len(argv) >= 4 else f"{len(argv)} arguments; {argv[2]!r} takes 4 and the ids"


def _migrate_shape(argv: List[str]) -> Optional[str]:
    if argv[3] == "list":
        return None if len(argv) == 6 else f"{len(argv)} arguments; list mode takes 6"
    return None if argv[3] == "zset" and len(argv) >= 6 else f"{len(argv)} arguments; zset mode takes 5 and the ids"


def _index_shape(argv: List[str]) -> Optional[str]:
    return None if argv and len(argv) % 2 == 0 else f"{len(argv)} arguments: not whole (topic, time) pairs"


#: The exact ARGV count of the scripts whose count depends on a mode or a
#: list (issue 21, "one shape per script"): what is wrong, or None. The
#: others' count is fixed by the header (argv_required == argv_max).
SHAPES = {"release": _release_shape, "reserve": _reserve_shape, "push_many": _push_many_shape,
          "dead": _dead_shape, "migrate": _migrate_shape, "index": _index_shape,
          "release_topic": lambda argv: _release_shape(argv, 2), "push_many_topic": _push_many_shape,
          "dead_topic": _dead_shape}


def check_call(args: List[str], layout: str = "classic") -> Tuple[str, List[str]]:
    """The script's name and what in this call breaks its header (empty: nothing),
    in ``layout``."""
    cmd, script = args[0].upper(), args[1]
    sha = script if cmd == "EVALSHA" else hashlib.sha1(script.encode("latin-1")).hexdigest()
    contract = CONTRACTS.get(sha.lower())
    if contract is None:
        return "?", [f"{cmd} of a script that is not in lua/ (sha {sha})"]
    numkeys = int(args[2])
    keys, argv = args[3 : 3 + numkeys], args[3 + numkeys :]
    errors = []
    topic: Optional[str] = None
    declared = contract.keys
    if layout == "classic" and contract.name.endswith("_topic"):
        return contract.name, ["a per-topic script in the classic layout"]
    if layout == "topic" and all(p in INDEX_KEYS for patterns, _ in declared for p in patterns):
        pass  # the index (index.lua): checked as the header gives it
    elif layout == "topic":
        # One topic's slot: the first key's hash tag is the topic of them all.
        tag = TAG.match(keys[0]) if keys else None
        if tag is None:
            return contract.name, [f"key {keys[:1]!r} is not of a topic ({PREFIX}{{<topic>}}:...)"]
        topic = tag.group(1)
        if any(not any(per_topic(p) for p in patterns) for patterns, _ in declared):
            return contract.name, ["a classic-layout script: it has keys the per-topic layout does not have"]
    required = len(declared)
    while required and declared[required - 1][1]:
        required -= 1
    if not required <= numkeys <= len(declared):
        errors.append(f"{numkeys} keys; the header states {required}..{len(declared)} in the {layout} layout")
    for (patterns, _), key in zip(declared, keys):
        if not contract.key_ok(patterns, key, topic):
            shapes = patterns if topic is None else [str(per_topic(p)) for p in patterns if per_topic(p)]
            errors.append(f"key {key!r} is not {' or '.join(shapes)}" + ("" if topic is None else f" of {topic!r}"))
    if len(argv) < contract.argv_required:
        errors.append(f"{len(argv)} arguments; the header requires {contract.argv_required}")
    if contract.argv_max is not None and len(argv) > contract.argv_max:
        errors.append(f"{len(argv)} arguments; the header names {contract.argv_max}")
    if contract.name in SHAPES and len(argv) >= contract.argv_required:
        shape = SHAPES[contract.name](argv)
        if shape:
            errors.append(shape)
    for n, name in contract.argv_names.items():
        if len(argv) < n:
            continue
        if topic is None:
            expected = name.replace("<prefix>", PREFIX)
            allowed: Tuple[str, ...] = ("", expected)
        else:
            translated = PER_TOPIC_ARGS[name]
            if translated is None:
                errors.append(f"ARGV[{n}] is {name}, which the per-topic layout does not have")
                continue
            expected = translated.replace("<prefix>", PREFIX).replace("{<topic>}", "{" + topic + "}")
            allowed = (expected,)
        if argv[n - 1] not in allowed:
            errors.append(f"ARGV[{n}] is {argv[n - 1]!r}, not {expected!r}")
    return contract.name, errors


# ---------------------------------------------------------------- the calls


def drive_every_operation(drivers, sdk: str, rds, mon: RawMonitor, keys) -> List[str]:  # type: ignore[no-untyped-def]
    """Each operation of the protocol once through ``sdk``'s driver; what the
    client wrote to the index or published during each call (empty: nothing)."""
    topic = new_id(f"contract-{sdk}")
    a, b, c, d = (new_id(f"{sdk}-{x}") for x in "abcd")
    retry = {"max_attempts": 2, "backoff": {"kind": "fixed", "delay_ms": 1}}
    windows: List[Tuple[str, int, int]] = []

    def step(req: Dict[str, Any]) -> Dict[str, Any]:
        """``req`` through the driver, its commands' window noted."""
        since = mon.mark(rds)
        answer = ok(drivers, sdk, req)
        windows.append((f"{req['op']} {req.get('id', '')}", since + 1, mon.mark(rds)))
        return answer

    def push(job_id: str, delay_ms: int, **extra: Any) -> Dict[str, Any]:
        return step({"op": "push", "topic": topic, "id": job_id, "delay_ms": delay_ms, "body_b64": "", **extra})

    push(a, 0, body_b64="YQ==")
    push(b, 0, **retry)
    taken = push(b, 0, if_absent=True)
    assert "taken" in taken, f"an if-absent push of a taken id pushed: {taken}"
    push(c, 60_000)
    step({"op": "reschedule", "id": c, **keys.named(topic), "delay_ms": 120_000})
    step({"op": "remove", "id": c, **keys.named(topic)})
    step({"op": "push_many", "if_absent": False, "jobs": [{"topic": topic, "id": d, "delay_ms": 0, "body_b64": ""}]})
    ready = keys.ready(topic)
    assert wait_until(lambda: rds.llen(ready) >= 3), "the server did not move the jobs"
    step({"op": "pop", "topic": topic})
    step({"op": "bpop", "topic": topic, "timeout_ms": 2000})
    # A bpop that waits: pop.lua finds nothing, BRPOP takes the id the
    # server makes ready meanwhile, take.lua hands it out.
    waiting, got = topic + "-wait", {}
    waiter = threading.Thread(target=lambda: got.update(ok(drivers, sdk, {"op": "bpop", "topic": waiting,
                                                                        "timeout_ms": 20_000})), daemon=True)
    waiter.start()
    assert wait_until(lambda: any(c.get("cmd") == "brpop" for c in rds.client_list())), "bpop never waited"
    other = "rust" if sdk != "rust" else "php"
    ok(drivers, other, {"op": "push", "topic": waiting, "id": new_id(f"{sdk}-w"), "delay_ms": 0, "body_b64": ""})
    waiter.join(30)
    assert got.get("job") is not None, f"the waiting bpop got nothing: {got}"
    job = step({"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
    assert job is not None
    step({"op": "touch", "id": job["id"], **keys.named(topic), "receipt": job["receipt"], "ttr_ms": 30_000})
    step({"op": "release", "id": job["id"], **keys.named(topic), "receipt": job["receipt"], "delay_ms": 0})
    job = step({"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 5000})["job"]
    assert job is not None
    step({"op": "bury", "id": job["id"], **keys.named(topic), "receipt": None})
    step({"op": "dead_list", "topic": topic, "start": 0, "count": 10})
    step({"op": "requeue_dead", "topic": topic, "ids": None})
    assert wait_until(lambda: rds.llen(ready) >= 1)
    job = step({"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 5000})["job"]
    assert job is not None
    step({"op": "ack", "id": job["id"], **keys.named(topic), "receipt": job["receipt"]})
    step({"op": "purge_dead", "topic": topic, "ids": None})
    # The server's connections: those that read its index (each tick does,
    # after writing the announcements on the same connection); its index
    # writes are not the client's.
    server = {src for src, c in zip(mon.sources, mon.commands)
              if c[0].upper() == "ZRANGE" and len(c) > 1 and c[1] == PREFIX + "due"}
    problems: List[str] = []
    for label, since, until in windows:
        window = [c for src, c in zip(mon.sources[since:until], mon.commands[since:until]) if src not in server]
        problems.extend(f"{label}: {p}" for p in client_index_writes(window))
    return problems


def client_index_writes(window: List[List[str]]) -> List[str]:
    """What in ``window`` (the commands a client sent during one call) writes
    the server's index or publishes a wake: nothing may, in either layout."""
    index = {PREFIX + "due", PREFIX + "topics"}
    return [f"the client sent {c} itself" for c in window
            if c[0].upper() == "PUBLISH" or (len(c) > 1 and c[1] in index)]


#: Where a client's call of each announcing script carries the wake channel
#: (ARGV position); release, reserve and dead are read in missing_wake.
WAKE_AT = {"push": 11, "push_many": 3, "reschedule": 3, "touch": 4, "push_topic": 11, "push_many_topic": 3}


def missing_wake(args: List[str]) -> Optional[str]:
    """What is wrong when a client's call of a script that announces leaves
    out the wake channel (None: it carries it, or the call announces
    nothing). The server's own calls (release.lua's expiry) are no client's."""
    cmd, script = args[0].upper(), args[1]
    sha = script if cmd == "EVALSHA" else hashlib.sha1(script.encode("latin-1")).hexdigest()
    contract = CONTRACTS.get(sha.lower())
    if contract is None:
        return None
    argv = args[3 + int(args[2]) :]
    wake = PREFIX + "wake"
    name = contract.name
    if name in WAKE_AT:
        good = len(argv) >= WAKE_AT[name] and argv[WAKE_AT[name] - 1] == wake
    elif name in ("release", "release_topic"):
        at = 3 if name == "release" else 2  # the mode's position
        good = len(argv) <= at or argv[at] != "held" or (len(argv) > at + 3 and argv[at + 3] == wake)
    elif name == "reserve":
        # One job: ARGV[3] "" and ARGV[4] the channel; a batch: the value left after the pairs.
        one = len(argv) == 4 and argv[2] == "" and argv[3] == wake
        batch = len(argv) > 3 and argv[2] != "" and (len(argv) - 3) % 2 == 1 and argv[-1] == wake
        good = one or batch
    elif name in ("dead", "dead_topic"):
        good = len(argv) < 3 or not argv[2].startswith("requeue") or argv[2] == "requeue " + wake
    else:
        return None
    return None if good else f"{name}.lua called without the wake channel {wake}: {args[3:][:16]}"


@pytest.mark.parametrize("sdk", SDKS)
def test_every_call_matches_its_scripts_header(sdk, drivers, delayer_server, redis_server, rds, keys) -> None:  # type: ignore[no-untyped-def]
    mon = RawMonitor(redis_server)
    try:
        index_problems = drive_every_operation(drivers, sdk, rds, mon, keys)
    finally:
        mon.close()
    seen: Dict[str, int] = {}
    problems = []
    for args in mon.calls:
        name, errors = check_call(args, LAYOUT)
        seen[name] = seen.get(name, 0) + 1
        problems += [f"{name}.lua: {e}" for e in errors]
        problems += [m for m in [missing_wake(args)] if m]
    assert not problems, "\n".join(sorted(set(problems)))
    assert not index_problems, "\n".join(index_problems)
    # Every script the operations use was seen, so the check covered them.
    paired = {"push", "push_many", "remove", "release", "dead", "move"}
    used = {n if LAYOUT == "classic" else n + "_topic" for n in paired}
    used |= {"reschedule", "pop", "take", "reserve", "touch", "ack"}
    assert used <= set(seen), f"not seen: {sorted(used - set(seen))}"


def test_the_check_catches_a_drifted_call() -> None:
    """The check itself can fail: a push with an argument short, a key in the wrong place."""
    push = (LUA / "push.lua").read_bytes()
    sha = hashlib.sha1(push).hexdigest()
    w = PREFIX + "wake"
    good = ["EVALSHA", sha, "3", PREFIX + "job_pool", PREFIX + "job_bucket:1", PREFIX + "scheduled_count",
            "1", "t", "", "0", "1000", "", "", "", "", "", w, ""]
    assert check_call(good) == ("push", [])
    # One shape per script: a value left out, not sent as "", is a drift.
    short = good[:-1]
    assert check_call(short)[1] == ["11 arguments; the header requires 12"]
    assert check_call(good[:11])[1] == ["5 arguments; the header requires 12"]
    swapped = good[:3] + [good[4], good[3]] + good[5:]
    assert len(check_call(swapped)[1]) == 2
    many = (LUA / "push_many.lua").read_bytes()
    job = ["id", "t", "", "0", "1000", "", "", "", "", ""]
    wrong_prefix = ["EVALSHA", hashlib.sha1(many).hexdigest(), "2", PREFIX + "job_pool", PREFIX + "scheduled_count",
                    "other:job_bucket:", "", w, *job]
    assert check_call(wrong_prefix)[1] == [f"ARGV[1] is 'other:job_bucket:', not '{PREFIX}job_bucket:'"]
    good_many = wrong_prefix[:5] + [PREFIX + "job_bucket:"] + wrong_prefix[6:]
    assert check_call(good_many) == ("push_many", []) and check_call(good_many + job) == ("push_many", [])
    assert check_call(good_many[:-1])[1] == ["12 arguments: not 3 + ten per job"]
    move = (LUA / "move.lua").read_bytes()
    move_keys = [PREFIX + "job_pool", PREFIX + "malformed", PREFIX + "scheduled_count", PREFIX + "topics",
                 PREFIX + "reserved"]
    move_keys = [*move_keys, PREFIX + "flow_topics"]
    bare = ["EVALSHA", hashlib.sha1(move).hexdigest(), "6", *move_keys, PREFIX, PREFIX + "ready_queue:", "1000", "0", "0",
            PREFIX + "flow_pool:"]
    assert check_call(bare)[1] == [f"ARGV[1] is '{PREFIX}', not '{PREFIX}job_bucket:'"]
    # move.lua without its flow topics (issue 23), or without its reserved set: older short forms.
    moved = ["EVALSHA", bare[1], "6", *move_keys, PREFIX + "job_bucket:", PREFIX + "ready_queue:", "1000", "0", "0",
             PREFIX + "flow_pool:"]
    assert check_call(moved) == ("move", [])
    assert check_call(moved[:2] + ["5"] + moved[3:8] + moved[9:-1])[1] == [
        "5 keys; the header states 6..6 in the classic layout", "5 arguments; the header requires 6"]
    assert check_call(moved[:-3])[1] == ["3 arguments; the header requires 6"]
    ack = hashlib.sha1((LUA / "ack.lua").read_bytes()).hexdigest()
    acked = ["EVALSHA", ack, "4", PREFIX + "reserved", PREFIX + "job_bucket:1", PREFIX + "job_pool", PREFIX + "outcomes",
             "1", ""]
    assert check_call(acked) == ("ack", [])
    assert check_call(acked[:2] + ["3"] + acked[3:6] + acked[7:])[1] == ["3 keys; the header states 4..4 in the classic layout"]
    release = hashlib.sha1((LUA / "release.lua").read_bytes()).hexdigest()
    rel = ["EVALSHA", release, "5", PREFIX + "reserved", PREFIX + "job_pool", PREFIX + "malformed",
           PREFIX + "scheduled_count", PREFIX + "outcomes", PREFIX + "job_bucket:", PREFIX + "dead:", "0"]
    assert check_call(rel + ["held", "1", "", w, ""]) == ("release", [])
    assert check_call(rel + ["held", "1", "", w])[1] == ["7 arguments; held mode takes 8"]
    assert check_call(rel + ["expired", "100"]) == ("release", [])
    assert check_call(rel + ["expired", "100", ""])[1] == ["6 arguments; expired mode takes 5"]
    reserve = hashlib.sha1((LUA / "reserve.lua").read_bytes()).hexdigest()
    res = ["EVALSHA", reserve, "8", *(PREFIX + k for k in ("ready_queue:t", "reserved", "malformed", "receipt_seq",
                                                            "job_pool", "outcomes", "flow:t", "flow_gate:t")),
           PREFIX + "job_bucket:", "30000"]
    assert check_call(res + ["", w]) == ("reserve", []) and check_call(res + ["5", "a", "1", w]) == ("reserve", [])
    assert check_call(res + ["5", w]) == ("reserve", [])
    assert check_call(res + [""])[1] == ["3 arguments; the header requires 4"]
    assert check_call(res + ["5", "a", "1"])[1] == ["5 arguments: not 3 + whole (id, receipt) pairs + the channel"]
    assert check_call(res + ["", w, ""])[1] == ['5 arguments; one job (ARGV[3] "") takes 4']
    assert f"ARGV[1] is 'other:job_bucket:', not '{PREFIX}job_bucket:'" in check_call(wrong_prefix)[1]


def test_the_check_holds_the_per_topic_layout_to_its_names() -> None:
    """In the per-topic layout a call with a shared name, a key of another
    topic, the counts, or a classic argument fails; so does any index write
    or wake a client sends, and an announcing call without the channel."""
    sha = hashlib.sha1((LUA / "push_topic.lua").read_bytes()).hexdigest()
    t = PREFIX + "{t}:"
    head = ["EVALSHA", sha, "2", t + "pool", t + "job:1", "1", "t", "", "0", "1000"]
    good = head + [""] * 5 + [PREFIX + "wake", ""]
    assert check_call(good, "topic") == ("push_topic", [])
    assert check_call(good, "classic")[1] == ["a per-topic script in the classic layout"]
    classic = hashlib.sha1((LUA / "push.lua").read_bytes()).hexdigest()
    assert check_call(good[:1] + [classic] + good[2:], "topic")[1] == [
        "a classic-layout script: it has keys the per-topic layout does not have"]
    counted = good[:2] + ["3"] + good[3:5] + [PREFIX + "scheduled_count"] + good[5:]
    assert check_call(counted, "topic")[1] == ["3 keys; the header states 2..2 in the topic layout"]
    other = good[:4] + [PREFIX + "{u}:job:1"] + good[5:]
    assert check_call(other, "topic")[1] == [f"key '{PREFIX}{{u}}:job:1' is not <prefix>{{<topic>}}:job:<id> of 't'"]
    shared = good[:3] + [PREFIX + "job_pool"] + good[4:]
    assert check_call(shared, "topic")[1] == [f"key ['{PREFIX}job_pool'] is not of a topic ({PREFIX}{{<topic>}}:...)"]
    many = hashlib.sha1((LUA / "push_many_topic.lua").read_bytes()).hexdigest()
    classic_prefix = ["EVALSHA", many, "1", t + "pool", PREFIX + "job_bucket:", "", PREFIX + "wake", "id", "t", "", "0",
                      "1000", "", "", "", "", ""]
    assert check_call(classic_prefix, "topic")[1] == [f"ARGV[1] is '{PREFIX}job_bucket:', not '{t}job:'"]
    move = hashlib.sha1((LUA / "move.lua").read_bytes()).hexdigest()
    assert check_call(["EVALSHA", move, "4", t + "pool", t + "malformed", t + "x", t + "y", "", "", "1"], "topic")[1] \
        == ["a classic-layout script: it has keys the per-topic layout does not have"]

    # The wake channel in both layouts now ("" was the per-topic layout's before issue 21).
    assert check_call(good, "topic") == ("push_topic", [])
    assert check_call(head + [""] * 7, "topic")[1] == [f"ARGV[11] is '', not '{PREFIX}wake'"]

    # No index write or wake by a client, in either layout.
    call = ["EVALSHA", sha, "2", t + "pool", t + "job:1"]
    for written in (["ZADD", PREFIX + "due", "LT", "CH", "1.5", "t"], ["SADD", PREFIX + "topics", "t"],
                    ["PUBLISH", PREFIX + "wake", "1.5"]):
        assert client_index_writes([call, written]) == [f"the client sent {written} itself"]
    assert client_index_writes([call, ["BRPOP", t + "ready", "1"]]) == []

    # Each announcing script's call carries the channel where its header says.
    w = PREFIX + "wake"
    push11 = ["EVALSHA", sha, "2", t + "pool", t + "job:1", "1", "t", "", "0", "1000", "", "", "", "", ""]
    assert missing_wake(push11 + [w]) is None and missing_wake(push11 + [""]) is not None
    reserve = hashlib.sha1((LUA / "reserve.lua").read_bytes()).hexdigest()
    r = ["EVALSHA", reserve, "5", *(t + k for k in ("ready", "reserved", "malformed", "receipt_seq", "pool")), t + "job:"]
    assert missing_wake(r + ["1000", "", w]) is None and missing_wake(r + ["1000"]) is not None
    assert missing_wake(r + ["1000", "10", "a", "1", w]) is None and missing_wake(r + ["1000", "10", "a", "1"])
    dead = hashlib.sha1((LUA / "dead_topic.lua").read_bytes()).hexdigest()
    d = ["EVALSHA", dead, "2", t + "dead", t + "pool", t + "job:", "t"]
    assert missing_wake(d + ["requeue " + w, "100"]) is None and missing_wake(d + ["requeue", "100"])
    assert missing_wake(d + ["purge", "100"]) is None and missing_wake(d + ["list", "0", "10"]) is None
    release = hashlib.sha1((LUA / "release_topic.lua").read_bytes()).hexdigest()
    rel = ["EVALSHA", release, "5", t + "reserved", t + "pool", t + "malformed", t + "dead", t + "outcomes", t + "job:"]
    assert missing_wake(rel + ["0", "held", "id", "", w]) is None and missing_wake(rel + ["0", "held", "id", "", ""])
    assert missing_wake(rel + ["backoff", "expired", "100"]) is None  # the server's expiry
    assert check_call(rel + ["0", "held", "id", "", w, ""], "topic") == ("release_topic", [])
    assert check_call(rel + ["backoff", "expired", "100"], "topic") == ("release_topic", [])
    assert check_call(rel + ["backoff", "expired", "100", ""], "topic")[1] == ["5 arguments; expired mode takes 4"]
    # The classic dead-letter prefix where release_topic.lua has the action: a drift.
    drifted = check_call(rel + [PREFIX + "dead:", "0", "held", "id", "", w, ""], "topic")[1]
    assert "8 arguments; the header names 7" in drifted and "ARGV[3] is ['0'], not held or expired" in drifted
