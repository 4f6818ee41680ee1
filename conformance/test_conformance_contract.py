"""Every script call any client sends matches the script's header.

Each script in lua/ states its KEYS and ARGV in its header: that header is the
contract (docs/PROTOCOL.md, Operations). Callers build the calls in one place
per SDK (the builders), and the server builds its own; this test holds them
all to the headers, black-box: it drives every operation through each SDK's
driver while a raw MONITOR connection records every EVALSHA / EVAL that
reaches Redis (the server's move and expiry calls included), and checks each
recorded call against the header of the script its SHA names:

- the number of keys is the number of KEYS lines (less the optional ones at
  the end, which may be left out);
- each key has the shape the header gives (`<prefix>job_pool`,
  `<prefix>job_bucket:<id>`, ...);
- the number of arguments lies between the last required ARGV and the last
  ARGV the header names (unbounded after an `ARGV[n..]` line);
- an argument the header describes as a key prefix or a channel
  (`"<prefix>job_bucket:"`, `"<prefix>wake"`) is exactly that name.

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
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import PREFIX
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
    def key_ok(patterns: List[str], key: str) -> bool:
        for pattern in patterns:
            rx = re.sub(r"<[a-z_]+>", ".+", re.escape(pattern).replace("<prefix>", re.escape(PREFIX), 1))
            if re.fullmatch(rx, key, re.S):
                return True
        return False


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
        optional = "optional" in text or "absent" in text
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
    assert by_name["push"].argv_required == 5 and by_name["push"].argv_max == 11
    assert by_name["push_many"].argv_max is None and by_name["push_many"].argv_names[1] == "<prefix>job_bucket:"
    assert [k for k, _ in by_name["move"].keys[2:4]] == [["<prefix>scheduled_count"], ["<prefix>topics"]]
    assert by_name["move"].keys[4] == (["<prefix>reserved"], True)
    assert by_name["move"].argv_names == {1: "<prefix>job_bucket:", 2: "<prefix>ready_queue:"}
    assert by_name["release"].argv_names[1] == "<prefix>job_bucket:"
    assert by_name["release"].argv_names[2] == "<prefix>dead:"
    # Either the counts (classic) or the topic's dead list (per-topic layout).
    assert by_name["release"].keys[3] == (["<prefix>scheduled_count", "<prefix>{<topic>}:dead"], False)
    assert by_name["dead"].argv_required == 3 and by_name["dead"].argv_max is None
    # No script is handed the bare prefix to build names from: every quoted
    # name an argument carries is a per-kind prefix or the wake channel.
    for c in by_name.values():
        for name in c.argv_names.values():
            assert name != "<prefix>" and (name.endswith(":") or name == "<prefix>wake"), (c.name, name)
    assert by_name["reserve"].argv_required == 2 and by_name["reserve"].argv_max is None


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


class RawMonitor:
    """MONITOR on a plain socket: each EVAL/EVALSHA as its list of arguments."""

    def __init__(self, server: RedisServer) -> None:
        self.calls: List[List[str]] = []
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
                args = [_unquote(t) for t in _TOKEN.findall(line)]
                if args and args[0].upper() in ("EVALSHA", "EVAL"):
                    self.calls.append(args)
        except (OSError, ValueError):
            pass  # closed at the end

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def check_call(args: List[str]) -> Tuple[str, List[str]]:
    """The script's name and what in this call breaks its header (empty: nothing)."""
    cmd, script = args[0].upper(), args[1]
    sha = script if cmd == "EVALSHA" else hashlib.sha1(script.encode("latin-1")).hexdigest()
    contract = CONTRACTS.get(sha.lower())
    if contract is None:
        return "?", [f"{cmd} of a script that is not in lua/ (sha {sha})"]
    numkeys = int(args[2])
    keys, argv = args[3 : 3 + numkeys], args[3 + numkeys :]
    errors = []
    required = len(contract.keys)
    while required and contract.keys[required - 1][1]:
        required -= 1
    if not required <= numkeys <= len(contract.keys):
        errors.append(f"{numkeys} keys; the header states {required}..{len(contract.keys)}")
    for (patterns, _), key in zip(contract.keys, keys):
        if not contract.key_ok(patterns, key):
            errors.append(f"key {key!r} is not {' or '.join(patterns)}")
    if len(argv) < contract.argv_required:
        errors.append(f"{len(argv)} arguments; the header requires {contract.argv_required}")
    if contract.argv_max is not None and len(argv) > contract.argv_max:
        errors.append(f"{len(argv)} arguments; the header names {contract.argv_max}")
    for n, name in contract.argv_names.items():
        expected = name.replace("<prefix>", PREFIX)
        if len(argv) >= n and argv[n - 1] not in ("", expected):
            errors.append(f"ARGV[{n}] is {argv[n - 1]!r}, not {expected!r}")
    return contract.name, errors


# ---------------------------------------------------------------- the calls


def drive_every_operation(drivers, sdk: str, rds) -> None:  # type: ignore[no-untyped-def]
    """Each operation of the protocol once through ``sdk``'s driver."""
    topic = new_id(f"contract-{sdk}")
    a, b, c, d = (new_id(f"{sdk}-{x}") for x in "abcd")
    retry = {"max_attempts": 2, "backoff": {"kind": "fixed", "delay_ms": 1}}
    ok(drivers, sdk, {"op": "push", "topic": topic, "id": a, "delay_ms": 0, "body_b64": "YQ=="})
    ok(drivers, sdk, {"op": "push", "topic": topic, "id": b, "delay_ms": 0, "body_b64": "", **retry})
    ok(drivers, sdk, {"op": "push", "topic": topic, "id": b, "delay_ms": 0, "body_b64": "", "if_absent": True})
    ok(drivers, sdk, {"op": "push", "topic": topic, "id": c, "delay_ms": 60_000, "body_b64": ""})
    ok(drivers, sdk, {"op": "reschedule", "id": c, "delay_ms": 120_000})
    ok(drivers, sdk, {"op": "remove", "id": c})
    ok(drivers, sdk, {"op": "push_many", "if_absent": False,
                      "jobs": [{"topic": topic, "id": d, "delay_ms": 0, "body_b64": ""}]})
    ready = PREFIX + "ready_queue:" + topic
    assert wait_until(lambda: rds.llen(ready) >= 3), "the server did not move the jobs"
    ok(drivers, sdk, {"op": "pop", "topic": topic})
    ok(drivers, sdk, {"op": "bpop", "topic": topic, "timeout_ms": 2000})
    job = ok(drivers, sdk, {"op": "reserve", "topic": topic, "ttr_ms": 30_000})["job"]
    assert job is not None
    ok(drivers, sdk, {"op": "touch", "id": job["id"], "receipt": job["receipt"], "ttr_ms": 30_000})
    ok(drivers, sdk, {"op": "release", "id": job["id"], "receipt": job["receipt"], "delay_ms": 0})
    job = ok(drivers, sdk, {"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 5000})["job"]
    assert job is not None
    ok(drivers, sdk, {"op": "bury", "id": job["id"], "receipt": None})
    ok(drivers, sdk, {"op": "dead_list", "topic": topic, "start": 0, "count": 10})
    ok(drivers, sdk, {"op": "requeue_dead", "topic": topic, "ids": None})
    assert wait_until(lambda: rds.llen(ready) >= 1)
    job = ok(drivers, sdk, {"op": "breserve", "topic": topic, "ttr_ms": 30_000, "timeout_ms": 5000})["job"]
    assert job is not None
    ok(drivers, sdk, {"op": "ack", "id": job["id"], "receipt": job["receipt"]})
    ok(drivers, sdk, {"op": "purge_dead", "topic": topic, "ids": None})


@pytest.mark.parametrize("sdk", SDKS)
def test_every_call_matches_its_scripts_header(sdk, drivers, delayer_server, redis_server, rds) -> None:  # type: ignore[no-untyped-def]
    mon = RawMonitor(redis_server)
    try:
        drive_every_operation(drivers, sdk, rds)
    finally:
        mon.close()
    seen: Dict[str, int] = {}
    problems = []
    for args in mon.calls:
        name, errors = check_call(args)
        seen[name] = seen.get(name, 0) + 1
        problems += [f"{name}.lua: {e}" for e in errors]
    assert not problems, "\n".join(sorted(set(problems)))
    # Every script the operations use was seen, so the check covered them.
    used = {"push", "push_many", "reschedule", "remove", "pop", "take", "reserve", "touch", "release",
            "dead", "ack", "move"}
    assert used <= set(seen), f"not seen: {sorted(used - set(seen))}"


def test_the_check_catches_a_drifted_call() -> None:
    """The check itself can fail: a push with an argument short, a key in the wrong place."""
    push = (LUA / "push.lua").read_bytes()
    sha = hashlib.sha1(push).hexdigest()
    good = ["EVALSHA", sha, "3", PREFIX + "job_pool", PREFIX + "job_bucket:1", PREFIX + "scheduled_count",
            "1", "t", "", "0", "1000"]
    assert check_call(good) == ("push", [])
    short = good[:-1]
    assert check_call(short)[1] == ["4 arguments; the header requires 5"]
    swapped = good[:3] + [good[4], good[3]] + good[5:]
    assert len(check_call(swapped)[1]) == 2
    many = (LUA / "push_many.lua").read_bytes()
    wrong_prefix = ["EVALSHA", hashlib.sha1(many).hexdigest(), "2", PREFIX + "job_pool", PREFIX + "scheduled_count",
                    "other:job_bucket:", "", "", "id"]
    assert check_call(wrong_prefix)[1] == [f"ARGV[1] is 'other:job_bucket:', not '{PREFIX}job_bucket:'"]
    move = (LUA / "move.lua").read_bytes()
    bare = ["EVALSHA", hashlib.sha1(move).hexdigest(), "4", PREFIX + "job_pool", PREFIX + "malformed",
            PREFIX + "scheduled_count", PREFIX + "topics", PREFIX, PREFIX + "ready_queue:", "1000"]
    assert check_call(bare)[1] == [f"ARGV[1] is '{PREFIX}', not '{PREFIX}job_bucket:'"]
    assert f"ARGV[1] is 'other:job_bucket:', not '{PREFIX}job_bucket:'" in check_call(wrong_prefix)[1]
