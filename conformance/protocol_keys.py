"""The keys and job fields docs/PROTOCOL.md lists, read from its tables.

The hostile-input suite (test_hostile_input.py) builds its cases from these,
so a key or field added to the protocol's tables gets the same attacks
without anyone writing them: the tables are the one list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List

PROTOCOL = Path(__file__).resolve().parent.parent / "docs" / "PROTOCOL.md"

#: Redis types the tables name, as TYPE answers them ("channel": a pub/sub
#: channel, not a key).
TYPES = {"ZSET": "zset", "HASH": "hash", "LIST": "list", "SET": "set", "STRING": "string"}


@dataclass(frozen=True)
class KeySpec:
    """One row of a key table."""

    layout: str  # "classic" or "topic"
    pattern: str  # as written, e.g. "<prefix>ready_queue:<topic>"
    type: str  # a TYPES value, or "channel"
    written_by: str
    read_by: str

    def name(self, prefix: str, topic: str, job_id: str) -> str:
        """The key (or channel) for one topic and job id."""
        return self.pattern.replace("<prefix>", prefix).replace("<topic>", topic).replace("<id>", job_id)

    @property
    def kind(self) -> str:
        """What the key is, without prefix, topic or id: "job_pool", "ready",
        "job_bucket:", "due"... (the suite's way to drive the key's readers)."""
        bare = self.pattern.replace("<prefix>", "").replace("{<topic>}:", "")
        return bare.replace("<topic>", "").replace("<id>", "")

    @property
    def server_touches(self) -> bool:
        """Whether the server reads or writes it (its log must name it when it
        is broken)."""
        return "server" in self.written_by or "server" in self.read_by


@dataclass(frozen=True)
class FieldSpec:
    """One row of the job bucket's field table."""

    name: str
    required: bool
    numeric: bool


def _rows(section: str) -> List[List[str]]:
    """The cells of every row of the first table in ``section`` (its header
    and rule left out)."""
    rows: List[List[str]] = []
    seen_table = False
    for line in section.splitlines():
        if line.startswith("|"):
            seen_table = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] in ("key", "field") or set(cells[0]) <= set("- "):
                continue
            rows.append(cells)
        elif seen_table:
            break
    return rows


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^#{2,3} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + nxt.start()] if nxt else text[start:]


def keys(layout: str, text: str = "") -> List[KeySpec]:
    """Every key (and the wake channel) of ``layout``'s table."""
    text = text or PROTOCOL.read_text()
    heading = "## Keys" if layout == "classic" else "### The per-topic layout"
    out = []
    for cells in _rows(_section(text, heading)):
        pattern = cells[0].strip("`")
        kind = TYPES.get(cells[1], "channel" if "channel" in cells[1] else cells[1])
        out.append(KeySpec(layout, pattern, kind, cells[2], cells[3]))
    return out


def fields(text: str = "") -> List[FieldSpec]:
    """The job bucket's fields. A field is numeric when its meaning speaks of
    a count, a time or a wait (``attempts``, ``max_attempts``, ``*_ms``,
    ``dead_at``)."""
    text = text or PROTOCOL.read_text()
    out = []
    for cells in _rows(_section(text, "### The job bucket")):
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            numeric = name in ("attempts", "max_attempts", "dead_at", "receipt") or name.endswith("_ms")
            out.append(FieldSpec(name, cells[1].startswith("yes"), numeric))
    return out
