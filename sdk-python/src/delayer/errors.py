"""The one exception hierarchy of the Delayer SDK.

Every error raised by a public method of :class:`delayer.Delayer` or
:class:`delayer.aio.Delayer` is a :class:`DelayerError`; no raw redis-py
exception escapes.
"""

from __future__ import annotations

__all__ = [
    "DelayerError",
    "InvalidArgument",
    "ConfigError",
    "ConnectionFailed",
    "ProtocolError",
]


class DelayerError(Exception):
    """Base class of every error the Delayer SDK raises."""


class InvalidArgument(DelayerError, ValueError):
    """An argument breaks the protocol's input rules; nothing was sent to Redis."""


class ConfigError(DelayerError):
    """A ``delayer.conf`` file (or a constructor setting) is unreadable or invalid."""


class ConnectionFailed(DelayerError):
    """Redis could not be reached, timed out, or refused the credentials."""


class ProtocolError(DelayerError):
    """Redis answered with an error or with a reply the protocol does not allow."""
