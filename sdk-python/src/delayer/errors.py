"""The one exception hierarchy of the Delayer SDK.

Every error raised by a public method of :class:`delayer.Delayer` or
:class:`delayer.aio.Delayer` is a :class:`DelayerError`; no raw redis-py
exception escapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

if TYPE_CHECKING:  # models imports this module
    from .models import Taken

__all__ = [
    "DelayerError", "InvalidArgument", "ConfigError", "ConnectionFailed", "AuthenticationFailed", "ProtocolError",
    "IdTakenError",
]


class DelayerError(Exception):
    """Base class of every error the Delayer SDK raises."""


class InvalidArgument(DelayerError, ValueError):
    """An argument breaks the protocol's input rules; nothing was written.

    Most are refused before anything is sent; a few rules live in a script
    (a rate limit's: ``set_rate_limit``), which refuses the call before any
    write, in the same words for every SDK, the CLI and HTTP.
    """


class ConfigError(DelayerError):
    """A ``delayer.conf`` file (or a constructor setting) is unreadable or invalid."""


class ConnectionFailed(DelayerError):
    """Redis could not be reached, timed out, or refused the credentials."""


class AuthenticationFailed(ConnectionFailed):
    """Redis refused the credentials, or requires a password and none was
    given (a :class:`ConnectionFailed`, so code catching that still catches it)."""


class ProtocolError(DelayerError):
    """Redis answered with an error or with a reply the protocol does not allow."""


class IdTakenError(DelayerError):
    """A push with ``if_absent=True`` found ids already taken, and wrote nothing for them.

    :attr:`taken` says which job holds each id; :attr:`due` has the due
    time of each job pushed, in order, None for a taken one (``push_many``
    wrote the free ids all the same).
    """

    def __init__(self, taken: Sequence["Taken"], due: Sequence[Optional[float]]) -> None:
        self.taken: List["Taken"] = list(taken)
        self.due: List[Optional[float]] = list(due)
        super().__init__(_describe(self.taken))


class NotReplicatedError(DelayerError):
    """A durable push (``durable=...``) was written on the master, but no
    replica acknowledged it within the timeout: a failover now could lose it.

    :attr:`due` is what the push returned; :attr:`timeout` the wait, in
    seconds. Pushing the same ids again is safe (a push replaces).
    """

    def __init__(self, due: Any, timeout: float) -> None:
        self.due = due
        self.timeout = timeout
        count = len(due) if isinstance(due, list) else 1
        super().__init__(
            f"{count} job(s) written on the master, but no replica acknowledged them within "
            f"{timeout * 1000:.0f} ms: a failover now could lose them"
        )


def _describe(taken: Sequence["Taken"]) -> str:
    """``id 'a' is taken (topic 'sms', due at 1763750000.125)``, for up to five ids."""
    shown = ", ".join(
        f"{t.id!r} (topic {t.topic!r}, {'not waiting' if t.due is None else f'due at {t.due:.3f}'})"
        for t in taken[:5]
    )
    more = f" and {len(taken) - 5} more" if len(taken) > 5 else ""
    if len(taken) == 1:
        return f"id {shown} is taken; nothing was written for it"
    return f"{len(taken)} ids are taken: {shown}{more}; nothing was written for them"
