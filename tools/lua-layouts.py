#!/usr/bin/env python3
"""Build the layout pairs of lua/ from their one source in lua/layouts/,
and the scripts of lua/src/ with their shared pieces.

A script whose work differs between the key layouts is two scripts, one
shape each (issue 21, "one shape per script"): lua/<name>.lua for the
classic layout and lua/<name>_topic.lua for the per-topic one. Both come
from lua/layouts/<name>.lua, so their shared logic is written once:

- a line ending in ``--@classic`` is in the classic script only,
- a line ending in ``--@topic`` is in the per-topic script only,
- every other line is in both.

The marker and the spaces before it are dropped. A line ``--@include <name>``
(in lua/layouts/ or lua/src/) is replaced by lua/includes/<name>.lua, so that
logic two scripts share (the rate limit's token bucket of move_topic.lua and
move_flow.lua) is written once; lua/src/<name>.lua becomes lua/<name>.lua. The outputs are checked in
(every SDK loads lua/ as it is, and its copies must be byte-identical);
``--check`` fails when one is stale, and the test suite runs it. Writing
also refreshes the Python and PHP SDKs' copies of the outputs
(conformance/test_conformance_lua.py holds every copy to lua/).

    python3 tools/lua-layouts.py          # write lua/<name>.lua and lua/<name>_topic.lua, and the copies
    python3 tools/lua-layouts.py --check  # exit 1 when an output differs
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "lua"
COPIES = [ROOT / "sdk-python" / "src" / "delayer" / "lua", ROOT / "sdk-php" / "lua"]
MARK = re.compile(r"\s*--@(classic|topic)$")
INCLUDE = re.compile(r"^--@include (\w+)$")


def expand(source: str) -> str:
    """``source`` with each ``--@include <name>`` line replaced by lua/includes/<name>.lua."""
    out = []
    for line in source.splitlines():
        include = INCLUDE.match(line)
        out.append((LUA / "includes" / f"{include.group(1)}.lua").read_text().rstrip("\n") if include else line)
    return "\n".join(out) + "\n"


def render(source: str, layout: str) -> str:
    out = []
    for line in source.splitlines():
        mark = MARK.search(line)
        if mark is None:
            out.append(line)
        elif mark.group(1) == layout:
            out.append(line[: mark.start()])
    return "\n".join(out) + "\n"


def outputs() -> dict[Path, str]:
    built = {}
    for src in sorted((LUA / "layouts").glob("*.lua")):
        text = expand(src.read_text())
        built[LUA / src.name] = render(text, "classic")
        built[LUA / (src.stem + "_topic.lua")] = render(text, "topic")
    for src in sorted((LUA / "src").glob("*.lua")):
        built[LUA / src.name] = expand(src.read_text())
    return built


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    stale = []
    for path, text in outputs().items():
        if path.exists() and path.read_text() == text:
            continue
        if check:
            stale.append(path.name)
        else:
            # The SDKs keep copies of the layout pairs, not of the server's scripts.
            server_only = (LUA / "src" / path.name).exists()
            for out in [path] + ([] if server_only else [d / path.name for d in COPIES]):
                out.write_text(text)
                print(f"wrote {out.relative_to(ROOT)}")
    if stale:
        print(f"stale (run tools/lua-layouts.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
