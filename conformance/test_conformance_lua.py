"""The SDKs' copies of the Lua scripts are byte-identical to lua/.

Python ships them as package data (sdk-python/src/delayer/lua/) and PHP
reads them from sdk-php/lua/. The Rust crates have no copy: protocol/lua (the
crate delayer-protocol, which the Rust SDK and the server share) is a link to
lua/ and server/lua/move.lua a link to lua/move.lua, compiled in with
include_str!("../lua/...") and followed by `cargo package`, so there is
nothing to drift. move.lua is the server's alone and has no client copy.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CANON = REPO / "lua"
CLIENT_SCRIPTS = [
    "push.lua", "push_many.lua", "pop.lua", "take.lua", "remove.lua",
    "reserve.lua", "ack.lua", "touch.lua", "release.lua", "reschedule.lua", "dead.lua",
    "push_topic.lua", "push_many_topic.lua", "remove_topic.lua", "release_topic.lua", "dead_topic.lua",
    "lookup.lua", "list.lua", "stats.lua", "flow.lua", "flow_topic.lua",
]
COPIES = {
    "python": REPO / "sdk-python" / "src" / "delayer" / "lua",
    "php": REPO / "sdk-php" / "lua",
}


@pytest.mark.parametrize("sdk", list(COPIES))
def test_sdk_ships_exactly_the_client_scripts(sdk: str) -> None:
    assert sorted(p.name for p in COPIES[sdk].glob("*.lua")) == sorted(CLIENT_SCRIPTS)


@pytest.mark.parametrize("script", CLIENT_SCRIPTS)
@pytest.mark.parametrize("sdk", list(COPIES))
def test_lua_copy_is_byte_identical(sdk: str, script: str) -> None:
    canon = (CANON / script).read_bytes()
    copy = (COPIES[sdk] / script).read_bytes()
    assert copy == canon, f"{COPIES[sdk] / script} differs from lua/{script}"


def test_rust_crates_include_lua_through_links() -> None:
    assert (REPO / "protocol" / "lua").resolve() == CANON.resolve(), "protocol/lua must link to lua/"
    # Each script included by a path inside the crate (through protocol/lua),
    # so `cargo package` carries it.
    included = set()
    for path in (REPO / "protocol" / "src").rglob("*.rs"):
        for rel in re.findall(r'include_str!\("([^"]*lua/[^"]+\.lua)"\)', path.read_text()):
            target = os.path.normpath(path.parent / rel)
            if target.startswith(str(REPO / "protocol" / "lua") + os.sep):
                included.add(os.path.basename(target))
    for script in CLIENT_SCRIPTS:
        assert script in included, f"delayer-protocol no longer includes lua/{script} through protocol/lua"
    move = REPO / "server" / "lua" / "move.lua"
    assert move.is_symlink() and move.resolve() == (CANON / "move.lua").resolve(), "server/lua/move.lua must link to lua/"
    server_src = (REPO / "server" / "src" / "engine" / "scripts.rs").read_text()
    assert 'include_str!("../../lua/move.lua")' in server_src, "the server no longer includes lua/move.lua"


def test_layout_pairs_are_built_from_their_one_source() -> None:
    # lua/<name>.lua and lua/<name>_topic.lua come from lua/layouts/<name>.lua
    # (tools/lua-layouts.py): an edit to one output alone is a drift.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "tools" / "lua-layouts.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    sources = sorted(p.stem for p in (CANON / "layouts").glob("*.lua"))
    assert sources == ["dead", "flow", "push", "push_many", "release", "remove"]
