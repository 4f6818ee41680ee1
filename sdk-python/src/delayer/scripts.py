"""The protocol's Lua scripts, shipped as package data (``delayer/lua/*.lua``).

The files are byte-identical copies of the repository's ``lua/`` directory
(a test checks it). This is the only module that loads or names scripts;
:mod:`delayer._send` sends them (EVALSHA, and EVAL of :func:`source` after a
``NOSCRIPT``).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Dict

__all__ = [
    "PUSH",
    "PUSH_MANY",
    "POP",
    "TAKE",
    "REMOVE",
    "RESERVE",
    "ACK",
    "TOUCH",
    "RELEASE",
    "RESCHEDULE",
    "DEAD",
    "LOOKUP",
    "LIST",
    "STATS",
    "NAMES",
    "source",
]

#: Script names, also their file names without ``.lua``.
PUSH = "push"
#: push_many.lua: up to 100 jobs per call, 10 calls per round trip.
PUSH_MANY = "push_many"
POP = "pop"
TAKE = "take"
REMOVE = "remove"
#: The at-least-once mode (docs/PROTOCOL.md, "Reserve and ack"): reserve.lua
#: hands a job out reserved (also after ``BLMOVE`` in ``breserve``); ack.lua
#: ends a reservation with success; touch.lua sets a held reservation's
#: deadline to now + ttr (a worker still busy with the job).
RESERVE = "reserve"
ACK = "ack"
TOUCH = "touch"
#: release.lua ends a reservation without success (release and bury). Clients
#: use only its ``held`` mode; its ``expired`` mode is the server's.
RELEASE = "release"
RESCHEDULE = "reschedule"
#: dead.lua lists, re-queues and purges dead letters.
DEAD = "dead"
#: Read-only inspection (delayer.inspect): one job's state, a page of a
#: topic's jobs, per-topic numbers.
LOOKUP = "lookup"
LIST = "list"
STATS = "stats"
NAMES = (PUSH, PUSH_MANY, POP, TAKE, REMOVE, RESERVE, ACK, TOUCH, RELEASE, RESCHEDULE, DEAD, LOOKUP, LIST, STATS)

_cache: Dict[str, bytes] = {}


def _read(name: str) -> bytes:
    return files("delayer").joinpath("lua", name + ".lua").read_bytes()


def source(name: str) -> bytes:
    """Return the exact bytes of script ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise KeyError(name)
    text = _cache.get(name)
    if text is None:
        text = _read(name)
        _cache[name] = text
    return text
