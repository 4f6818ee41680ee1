"""redis-py's errors as the SDK's, with secrets scrubbed.

No raw redis-py exception leaves a public method: every one becomes a
:class:`~delayer.DelayerError` naming the Redis it came from, and no password
(from the URL, ``password=`` or a passed-in client) appears in its text.
"""

from __future__ import annotations

from types import TracebackType
from typing import Optional, Sequence, Type

from redis.exceptions import (
    AuthenticationError,
    ConnectionError as RedisConnectionError,
    RedisError,
    ResponseError,
    TimeoutError as RedisTimeoutError,
)

from .errors import ConnectionFailed, DelayerError, ProtocolError


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def translate(exc: RedisError, where: str, secrets: Sequence[str]) -> DelayerError:
    """The SDK's error for a redis-py error."""
    detail = scrub(str(exc) or type(exc).__name__, secrets)
    if isinstance(exc, AuthenticationError):
        return ConnectionFailed(f"Redis at {where} refused the credentials: {detail}")
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError)):
        return ConnectionFailed(f"cannot reach Redis at {where}: {detail}")
    if isinstance(exc, ResponseError):
        return ProtocolError(f"Redis at {where} answered with an error: {detail}")
    return ProtocolError(f"unexpected reply from Redis at {where}: {detail}")


def lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection is gone (closed, reset, refused),
    as after a Redis restart: worth one more try on a new connection. Not a
    timeout (Redis may be busy: trying again doubles the wait) and not
    refused credentials."""
    return isinstance(exc, RedisConnectionError) and not isinstance(exc, AuthenticationError)


class Guard:
    """A context manager turning redis-py errors into the SDK's (sync or async code)."""

    __slots__ = ("where", "secrets")

    def __init__(self, where: str, secrets: Sequence[str]) -> None:
        self.where = where
        self.secrets = list(secrets)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if isinstance(exc, RedisError):
            raise translate(exc, self.where, self.secrets) from exc
