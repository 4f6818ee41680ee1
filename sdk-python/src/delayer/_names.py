"""Ids and topics that are not UTF-8: how the SDK reads them, and gives them back.

Delayer 1.x and PHP clients write any bytes. The SDK's ids and topics are
``str``; one that is not UTF-8 is decoded with ``surrogateescape`` (PEP
383, as ``os.fsdecode``), so nothing is lost and, passed back to any call,
it is the very bytes read (PROTOCOL.md, "Names that are not UTF-8").
"""

from __future__ import annotations

ENCODING = "utf-8"
ESCAPE = "surrogateescape"


def name(value: bytes) -> str:
    """A name read from Redis as the SDK's ``str``: UTF-8 text as it is, any
    other bytes with surrogate escapes (never fails)."""
    return value.decode(ENCODING, ESCAPE)


def name_bytes(value: str) -> bytes:
    """The bytes of a name :func:`name` made (or of any text): what Redis holds."""
    return value.encode(ENCODING, ESCAPE)


def is_canonical(value: str) -> bool:
    """Whether :func:`name` would read ``value``'s bytes as ``value``: one name, one
    ``str`` (``"\\udcc3\\udca9"``, a second spelling of ``"é"``, is not)."""
    try:
        return name(name_bytes(value)) == value
    except UnicodeEncodeError:  # a surrogate no byte escapes to (U+D800..U+DC7F, U+DD00..U+DFFF)
        return False
