"""Blocking waits (``bpop``, ``breserve``): how long each BRPOP / BLMOVE / BRPOPLPUSH may
block, and the connections they block on.

A blocking command's reply takes as long as the wait, longer than a socket
timeout (redis-py 8's 5 s killed every idle worker). So the waits run on
connections of their own with a read timeout of :data:`WAIT_SLICE` plus a
margin, no one wait is longer than the slice (a longer timeout waits again),
and a connection that died silently is still noticed.
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
    """The monotonic deadline of a ``timeout`` started at ``now``; None for 0 (forever)."""
    return None if timeout == 0 else now + timeout


def seconds(deadline: Optional[float], now: float) -> Optional[float]:
    """The next wait's timeout until ``deadline``: None when the time is up;
    at most :data:`WAIT_SLICE`, rounded up to the millisecond (never 0, "forever")."""
    if deadline is None:
        return WAIT_SLICE
    ms = math.ceil((deadline - now) * 1000.0)
    if ms <= 0:
        return None
    return min(ms / 1000.0, WAIT_SLICE)


def connection_kwargs(client_kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The waits' connection settings: the client's, with a read timeout that
    outlasts a wait (and the connect timeout kept)."""
    kwargs = dict(client_kwargs)
    timeout = kwargs.get("socket_timeout")
    margin = timeout if isinstance(timeout, (int, float)) and timeout > 0 else READ_MARGIN
    kwargs["socket_connect_timeout"] = kwargs.get("socket_connect_timeout") or timeout
    kwargs["socket_timeout"] = WAIT_SLICE + margin
    return kwargs
