"""Whether Redis may evict job data: the Workers' warning (issue 20, item 3).

Under any ``maxmemory-policy`` but ``noeviction`` a full Redis deletes keys,
job buckets first (they carry TTLs): jobs vanish without a trace. So a
Worker reads the policy at start and after each reconnect (``CONFIG GET``,
else ``INFO memory``) and logs :data:`WARNING`, in every SDK's words.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from . import _send
from ._names import name

#: Logged, with the policy, unless it is ``noeviction`` (the same words in every SDK and the server).
WARNING = (
    "redis maxmemory-policy is {policy}: Redis may evict job data and lose jobs; set maxmemory-policy "
    "noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
)
#: Logged when neither CONFIG GET nor INFO would tell the policy.
UNREADABLE = (
    "cannot read redis maxmemory-policy (CONFIG GET and INFO memory were refused); unless it is noeviction, "
    "Redis may evict job data and lose jobs"
)
SAFE = "noeviction"


def _text(value: Any) -> Optional[str]:
    if isinstance(value, bytes):
        return name(value)
    return value if isinstance(value, str) else None


def _find(reply: Any, field: str) -> Optional[str]:
    """``field``'s value in a reply as redis-py parses it (a dict, a flat
    ``[name, value, ...]`` list, or a dict of such per cluster node)."""
    if isinstance(reply, dict):
        for key, value in reply.items():
            if _text(key) == field:
                return _text(value)
        for value in reply.values():  # per node
            found = _find(value, field) if isinstance(value, (dict, list)) else None
            if found is not None:
                return found
    elif isinstance(reply, (list, tuple)):
        for k in range(0, len(reply) - 1, 2):
            if _text(reply[k]) == field:
                return _text(reply[k + 1])
    return None


def read() -> "_send.Op[Optional[str]]":
    """The policy, or None when Redis would not tell (both commands refused).
    A refusal is an answer; a lost connection raises, as any call's."""
    replies = yield _send.Commands([("CONFIG", "GET", "maxmemory-policy")], tolerate=True)
    policy = _find(replies[0], "maxmemory-policy") if isinstance(replies, list) and replies else None
    if policy is None:
        replies = yield _send.Commands([("INFO", "memory")], tolerate=True)
        policy = _find(replies[0], "maxmemory_policy") if isinstance(replies, list) and replies else None
    return policy


def warning(policy: Optional[str]) -> Optional[str]:
    """What to log for ``policy`` (None: it could not be read); None when it is safe."""
    if policy is None:
        return UNREADABLE
    if policy.strip().lower() == SAFE:
        return None
    return WARNING.format(policy=policy)


class Watch:
    """When a reading is said: the first, the first after an outage, and any
    whose policy changed (not once per pooled connection after a restart)."""

    def __init__(self) -> None:
        self._first = True
        self._outage = False
        self._last: Optional[str] = None

    def outage(self) -> None:
        """A call failed: Redis could not be reached."""
        self._outage = True

    def report(self, policy: Optional[str], log: logging.Logger) -> None:
        """Log :func:`warning`'s line for ``policy`` when it is to be said."""
        say = self._first or self._outage or policy != self._last
        self._first, self._outage, self._last = False, False, policy
        line = warning(policy) if say else None
        if line is not None:
            log.warning("%s", line)
