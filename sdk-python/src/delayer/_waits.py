"""Blocking waits (``bpop``, ``breserve``): how long each BRPOP / BLMOVE may
block, and the connections they block on.

A client's socket timeout bounds how long a reply may take; a blocking
command's reply legitimately takes as long as the wait (redis-py 8 defaults
to 5 s, which killed every idle worker after 5 s). So the waits run on
connections of their own, configured like the client's but with a read
timeout of :data:`WAIT_SLICE` plus a margin, and no single wait is longer
than :data:`WAIT_SLICE`: a longer timeout (or forever) waits again, within
the same deadline. A connection that died silently is still noticed, within
one slice and the margin.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional

#: The longest one BRPOP / BLMOVE blocks, in seconds.
WAIT_SLICE = 30.0
#: How much longer than its wait a blocking command's reply may take, when the
#: client sets no socket timeout of its own (with one, that is the margin).
READ_MARGIN = 10.0


def deadline(timeout: float, now: float) -> Optional[float]:
    """The monotonic deadline of a checked bpop / breserve ``timeout`` started at
    ``now``: None for 0 (forever). With :func:`seconds` it keeps the whole
    wait within one timeout, however many times it has to wait again."""
    return None if timeout == 0 else now + timeout


def seconds(deadline: Optional[float], now: float) -> Optional[float]:
    """The BRPOP (bpop) or BLMOVE (breserve) timeout for the next wait until ``deadline``.

    Returns None when the time is up; otherwise the time left (all of
    :data:`WAIT_SLICE` without a deadline), at most :data:`WAIT_SLICE`,
    rounded up to a whole millisecond (never 0, which BRPOP and BLMOVE would
    take as "forever").
    """
    if deadline is None:
        return WAIT_SLICE
    ms = math.ceil((deadline - now) * 1000.0)
    if ms <= 0:
        return None
    return min(ms / 1000.0, WAIT_SLICE)


def connection_kwargs(client_kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The connection settings of the waits' connections: the client's, with a
    read timeout that outlasts any one wait.

    The connect timeout stays what it was (redis-py takes the socket timeout
    for it when none is set).
    """
    kwargs = dict(client_kwargs)
    timeout = kwargs.get("socket_timeout")
    margin = timeout if isinstance(timeout, (int, float)) and timeout > 0 else READ_MARGIN
    kwargs["socket_connect_timeout"] = kwargs.get("socket_connect_timeout") or timeout
    kwargs["socket_timeout"] = WAIT_SLICE + margin
    return kwargs
