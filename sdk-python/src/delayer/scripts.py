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
    "PUSH", "PUSH_MANY", "POP", "TAKE", "REMOVE", "RESERVE", "ACK", "TOUCH", "RELEASE", "RESCHEDULE", "DEAD", "LOOKUP",
    "LIST", "STATS", "PUSH_TOPIC", "PUSH_MANY_TOPIC", "REMOVE_TOPIC", "DEAD_TOPIC", "RELEASE_TOPIC", "FLOW",
    "FLOW_TOPIC", "NAMES", "source",
]

#: Script names, also their file names without ``.lua`` (each file's header says what it does).
PUSH, PUSH_MANY, POP, TAKE, REMOVE = "push", "push_many", "pop", "take", "remove"
#: The at-least-once mode (docs/PROTOCOL.md, "Reserve and ack"); clients use only
#: release.lua's (release_topic.lua's) ``held`` mode (release and bury), ``expired`` is the server's.
RESERVE, ACK, TOUCH, RELEASE, RESCHEDULE, DEAD = "reserve", "ack", "touch", "release", "reschedule", "dead"
#: Read-only inspection (:mod:`delayer.inspect`).
LOOKUP, LIST, STATS = "lookup", "list", "stats"
#: The per-topic layout's own push, push_many, remove, dead and release (:meth:`delayer.keys.Keys.names` picks).
PUSH_TOPIC, PUSH_MANY_TOPIC, REMOVE_TOPIC, DEAD_TOPIC, RELEASE_TOPIC = (
    "push_topic", "push_many_topic", "remove_topic", "dead_topic", "release_topic")
#: Flow control: read, pause or resume a topic (flow.lua; the per-topic layout's flow_topic.lua).
FLOW, FLOW_TOPIC = "flow", "flow_topic"
NAMES = (PUSH, PUSH_MANY, POP, TAKE, REMOVE, RESERVE, ACK, TOUCH, RELEASE, RESCHEDULE, DEAD, LOOKUP, LIST, STATS,
         PUSH_TOPIC, PUSH_MANY_TOPIC, REMOVE_TOPIC, DEAD_TOPIC, RELEASE_TOPIC, FLOW, FLOW_TOPIC)

_cache: Dict[str, bytes] = {}


def _read(name: str) -> bytes:
    return files("delayer").joinpath("lua", name + ".lua").read_bytes()


def source(name: str) -> bytes:
    """Return the exact bytes of script ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise KeyError(name)
    text = _cache.get(name)
    if text is None:
        text = _cache[name] = _read(name)
    return text
