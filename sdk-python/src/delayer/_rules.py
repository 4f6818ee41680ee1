"""The protocol's input rules (docs/PROTOCOL.md, "Input rules"), checked before
anything is sent: every SDK refuses the same values and rounds delays the
same way. Each check returns the value as the scripts take it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional, Union

from ._names import is_canonical
from .errors import InvalidArgument

#: Longest delay and ready_max_lifetime: 10 years, in seconds.
MAX_SECONDS = 315_360_000
#: The largest max_attempts (0 means no limit).
MAX_ATTEMPTS_LIMIT = 1_000_000
#: Largest cursor or start of a listing: 2^53 - 1, as every SDK, the CLI
#: and the HTTP API take (the scripts' arithmetic on a larger one fails or
#: rounds; the Rust SDK's delayer::validate::MAX_POSITION).
MAX_POSITION = (1 << 53) - 1

Number = Union[int, float]


def check_name(kind: str, value: object) -> str:
    """Check an id or topic: any non-empty ``str`` (with the surrogate escapes
    of bytes that are not UTF-8: :mod:`delayer._names`), as Delayer 1.x took."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{kind} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{kind} must not be empty")
    if not value.isascii() and not is_canonical(value):
        raise InvalidArgument(
            f"{kind} is not valid UTF-8: it holds a lone surrogate that is not the surrogate escape of a byte "
            "outside UTF-8 (as the SDK hands out names that are not UTF-8)"
        )
    return value


def _number(kind: str, value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{kind} must be an int or float, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"{kind} must be finite, got {value!r}")
    return value


def delay_ms(value: object, kind: str = "delay") -> int:
    """Check a delay (0 to 10 years, seconds; ``kind`` names it) and return it in whole milliseconds."""
    seconds = _number(kind, value)
    if seconds < 0 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"{kind} must be 0 to {MAX_SECONDS} seconds, got {seconds!r}")
    return _round_ms(seconds)


def _round_ms(seconds: Number) -> int:
    """``seconds`` (checked: 0 to 10 years) in whole milliseconds, rounded as PROTOCOL.md says."""
    if isinstance(seconds, int):
        return seconds * 1000
    # As docs/PROTOCOL.md: to the nearest nanosecond, then to the millisecond,
    # halves up (Rust's Duration semantics, so 1.2345 s is 1235 ms). Exact
    # arithmetic: seconds * 1000.0 in floating point loses precision on huge delays.
    nanos = math.floor(Fraction(seconds) * 1_000_000_000 + Fraction(1, 2))
    return min((nanos + 500_000) // 1_000_000, MAX_SECONDS * 1000)


def lifetime_ms(value: object) -> int:
    """Check a ready_max_lifetime (1 s to 10 years, whole seconds) and return milliseconds."""
    seconds = _number("ready_max_lifetime", value)
    if isinstance(seconds, float):
        if not seconds.is_integer():
            raise InvalidArgument(f"ready_max_lifetime must be whole seconds, got {seconds!r}")
        seconds = int(seconds)
    if seconds < 1 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"ready_max_lifetime must be 1 to {MAX_SECONDS} seconds, got {seconds!r}")
    return seconds * 1000


def ttr_ms(value: object) -> int:
    """Check a reserve ttr (more than 0, at most 10 years) and return whole
    milliseconds, at least 1 (a ttr of 0 would take the job back at once)."""
    seconds = _number("ttr", value)
    if seconds <= 0 or seconds > MAX_SECONDS:
        raise InvalidArgument(f"ttr must be more than 0 and at most {MAX_SECONDS} seconds, got {seconds!r}")
    ms = _round_ms(seconds)
    if ms < 1:
        raise InvalidArgument(f"ttr must be at least 1 ms after rounding to the millisecond, got {seconds!r} s")
    return ms


def check_max_attempts(value: object) -> int:
    """Check a max_attempts: an int from 0 (no limit) to 1,000,000."""
    return count("max_attempts", value, 0, MAX_ATTEMPTS_LIMIT)


def count(kind: str, value: object, low: int, high: Optional[int]) -> int:
    """Check a whole number from ``low`` to ``high`` (None: no upper bound); bool is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{kind} must be an int, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"{low} to {high}" if high is not None else f"{low} or more"
        raise InvalidArgument(f"{kind} must be {bounds}, got {value!r}")
    return value


def check_timeout(value: object) -> float:
    """Check a bpop / breserve timeout: seconds >= 0, 0 meaning forever."""
    seconds = _number("timeout", value)
    if seconds < 0:
        raise InvalidArgument(f"timeout must be 0 (forever) or more seconds, got {seconds!r}")
    return float(seconds)


def rate_text(value: object) -> str:
    """A rate limit's jobs per second as flow.lua takes it (ARGV[4]): a real
    number (int or float, not bool), as the shortest text that reads back as
    its float (``repr``: ``0.5``, ``50.0``, ``1e-05``). Whether it is a rate
    at all (finite, above 0, at most 1,000,000, ...) the script alone says
    (``ERR invalid argument: ...``): its rules are written once, for every
    SDK, the CLI and HTTP alike."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"per_second must be an int or float, not {type(value).__name__}")
    try:
        return repr(float(value))
    except OverflowError:  # an int past any float: its digits, for the script to refuse as it does inf
        return str(value)


def burst_text(value: object) -> str:
    """A rate limit's burst as flow.lua takes it (ARGV[5]): None -> ``""`` (the
    script's default, one second's worth), else an int (not bool) as its
    digits; its range is the script's to check, as :func:`rate_text`'s."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"burst must be an int or None, not {type(value).__name__}")
    return str(value)


def encode_body(value: object) -> bytes:
    """Return the body as bytes: bytes-like as is, ``str`` encoded as UTF-8."""
    if isinstance(value, str):
        return utf8("body", value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"body must be bytes or str, not {type(value).__name__}")


def utf8(kind: str, text: str) -> bytes:
    """``text`` as UTF-8; InvalidArgument naming ``kind`` when it holds a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{kind} is not valid UTF-8 (it holds a lone surrogate)") from None


def check_if_absent(value: object) -> str:
    """push.lua's / push_many.lua's duplicate policy for ``if_absent``:
    ``"absent"`` (write nothing for an id that is taken) or ``"replace"``."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"if_absent must be a bool, not {type(value).__name__}")
    return "absent" if value else "replace"

