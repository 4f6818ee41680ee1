"""Ids and topics that are not UTF-8: how the SDK reads them, and gives them back.

Redis names are bytes, and Delayer 1.x and PHP clients write any bytes: a
Latin-1 topic, a binary id. The SDK's ids and topics are ``str``, so one that
is not UTF-8 is decoded with ``surrogateescape`` (PEP 383, as
``os.fsdecode`` does for file names): each byte that is not part of UTF-8
text becomes a lone surrogate U+DC80..U+DCFF, nothing is lost, and that
``str`` names the job everywhere: passed back to ack, remove, a lookup or a
dead-letter call, it is encoded back to the very bytes read
(docs/PROTOCOL.md, "Names that are not UTF-8"). So no call fails on, or
destroys, a job whose names it cannot decode. :mod:`delayer._send` hands
such names to redis-py as their bytes.
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
    """Whether ``value`` names bytes exactly as :func:`name` would have read
    them: text, or text with the surrogate escapes of bytes that are not
    UTF-8. (``"\\udcc3\\udca9"`` encodes to the UTF-8 of ``"é"``: a second
    spelling of that name, refused so that one name has one ``str``.)"""
    try:
        return name(name_bytes(value)) == value
    except UnicodeEncodeError:  # a surrogate no byte escapes to (U+D800..U+DC7F, U+DD00..U+DFFF)
        return False
