"""Blocking waits (``bpop``, ``breserve``): how long each BRPOP / BLMOVE may block.

One deadline per call keeps the whole wait within its timeout, however many
times it has to wait again (another consumer took the job first).
"""

from __future__ import annotations

import math
from typing import Optional


def deadline(timeout: float, now: float) -> Optional[float]:
    """The monotonic deadline of a checked bpop / breserve ``timeout`` started at
    ``now``: None for 0 (forever). With :func:`seconds` it keeps the whole
    wait within one timeout, however many times it has to wait again."""
    return None if timeout == 0 else now + timeout


def seconds(deadline: Optional[float], now: float) -> Optional[float]:
    """The BRPOP (bpop) or BLMOVE (breserve) timeout for the time left until ``deadline``.

    Returns 0 (forever) without a deadline, None when the time is up, and
    otherwise the remaining time rounded up to a whole millisecond (never 0,
    which BRPOP and BLMOVE would take as "forever").
    """
    if deadline is None:
        return 0
    ms = math.ceil((deadline - now) * 1000.0)
    if ms <= 0:
        return None
    return ms / 1000.0
