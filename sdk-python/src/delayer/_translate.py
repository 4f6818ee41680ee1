"""redis-py's errors as the SDK's, with secrets scrubbed.

No raw redis-py exception leaves a public method: every one becomes a
:class:`~delayer.DelayerError` naming the Redis it came from, and no password
(from the URL, ``password=`` or a passed-in client) appears in its text.
"""

from __future__ import annotations

from types import TracebackType
from typing import Optional, Sequence, Type, Union

from redis.exceptions import (AskError, AuthenticationError, ClusterDownError, ClusterError,
                              ConnectionError as RedisConnectionError, RedisClusterException, RedisError, ResponseError,
                              TimeoutError as RedisTimeoutError, TryAgainError)

from .errors import AuthenticationFailed, ConnectionFailed, DelayerError, InvalidArgument, ProtocolError


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


#: How Redis says "authenticate first" where redis-py raises no AuthenticationError
#: (a push's many arguments are cut off before Redis even says NOAUTH).
_UNAUTHENTICATED = ("Protocol error: unauthenticated", "NOAUTH", "Authentication required")


#: How a script refuses its input: "ERR invalid argument: <why>" (the "ERR " is redis-py's to drop).
_INVALID = "invalid argument: "


#: Redis Cluster's errors that pass (a failover, a resharding, no node reached yet):
#: redis-py gave up retrying, the caller may call again.
_CLUSTER_TRANSIENT = (ClusterDownError, TryAgainError, ClusterError, RedisClusterException)


def redirected(exc: object) -> bool:
    """A MOVED / ASK (the command did not run): a plain node client's reply,
    or one a cluster client could not follow (AskError in some versions)."""
    return isinstance(exc, AskError) or (isinstance(exc, ResponseError) and str(exc).startswith(("MOVED ", "ASK ")))


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis refusing this client until it authenticates
    (also behind RedisCluster's "cannot be connected", raised from it)."""
    if isinstance(exc, RedisClusterException) and exc.__cause__ is not None:
        return _refused(exc.__cause__)
    return isinstance(exc, AuthenticationError) or (
        isinstance(exc, (ResponseError, RedisConnectionError)) and any(m in str(exc) for m in _UNAUTHENTICATED)
    )


def translate(exc: Union[RedisError, RedisClusterException], where: str, secrets: Sequence[str],
              has_password: bool = True) -> DelayerError:
    """The SDK's error for a redis-py error; ``has_password``: whether the
    client sends credentials (else a refusal means a password is missing)."""
    detail = scrub(str(exc) or type(exc).__name__, secrets)
    if _refused(exc):
        if has_password:
            return AuthenticationFailed(f"Redis at {where} refused the credentials: {detail}")
        # Redis's own words here ("Protocol error: unauthenticated multibulk
        # length", "HELLO must be called ...") would only mislead.
        return AuthenticationFailed(
            f"Redis at {where} requires a password and none was given (set one in the URL, "
            "password= or delayer.conf)"
        )
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError) + _CLUSTER_TRANSIENT) or redirected(exc):
        return ConnectionFailed(f"cannot reach Redis at {where}: {detail}")
    if isinstance(exc, ResponseError):
        # A script refusing its input (flow.lua's rate limit: its rules live
        # there once, for every SDK, the CLI and HTTP) answers "ERR invalid
        # argument: <why>"; redis-py drops the "ERR ". The caller's mistake,
        # not Redis's: raised as the SDK's own, in the script's words.
        why = detail[4:] if detail.startswith("ERR ") else detail  # as a parser that keeps it gives it
        if why.startswith(_INVALID):
            return InvalidArgument(why[len(_INVALID):])
        return ProtocolError(f"Redis at {where} answered with an error: {detail}")
    return ProtocolError(f"unexpected reply from Redis at {where}: {detail}")


def lost_connection(exc: BaseException) -> bool:
    """Whether the connection is gone (as after a Redis restart): worth one
    more try on a new one. Not a timeout (Redis may be busy), nor refused credentials."""
    return isinstance(exc, RedisConnectionError) and not _refused(exc)


class Guard:
    """A context manager turning redis-py errors into the SDK's (sync or async code)."""

    __slots__ = ("where", "secrets", "has_password")

    def __init__(self, where: str, secrets: Sequence[str], has_password: bool = True) -> None:
        self.where = where
        self.secrets = list(secrets)
        self.has_password = has_password

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if isinstance(exc, (RedisError, RedisClusterException)):
            raise translate(exc, self.where, self.secrets, self.has_password) from exc
