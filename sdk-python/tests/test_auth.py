"""Credentials (issue 10, item 6): a missing password against a Redis that
requires one is the SDK's authentication error, whatever the call; not
"Protocol error: unauthenticated multibulk length" (what Redis answers an
unauthenticated client sending a command with many arguments, as a push does).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict

import pytest

from delayer import AuthenticationFailed, ConnectionFailed, Delayer, Job
from delayer import aio

from conftest import RedisServer

CALLS: Dict[str, Callable[[Any], Any]] = {
    "push": lambda d: d.push("t", "j", 1, b"x" * 100, max_attempts=3),
    "push_many": lambda d: d.push_many([Job("t", f"j{n}", 1) for n in range(3)]),
    "pop": lambda d: d.pop("t"),
    "bpop": lambda d: d.bpop("t", 0.1),
    "reserve": lambda d: d.reserve("t", 5),
    "breserve": lambda d: d.breserve("t", 5, 0.1),
    "ack": lambda d: d.ack("j"),
    "release": lambda d: d.release("j", 1),
    "dead_letters": lambda d: d.dead_letters("t"),
}


def check(e: AuthenticationFailed, port: int) -> None:
    assert isinstance(e, ConnectionFailed)  # what callers already catch
    assert f"Redis at 127.0.0.1:{port} requires a password and none was given" in str(e)
    assert "Protocol error" not in str(e)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_missing_password_is_the_authentication_error(auth_server: RedisServer, call: str) -> None:
    with Delayer(f"redis://127.0.0.1:{auth_server.port}/0") as d:
        with pytest.raises(AuthenticationFailed) as info:
            CALLS[call](d)
    check(info.value, auth_server.port)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_async_a_missing_password_is_the_authentication_error(auth_server: RedisServer, call: str) -> None:
    async def main() -> None:
        async with aio.Delayer(f"redis://127.0.0.1:{auth_server.port}/0") as d:
            await CALLS[call](d)

    with pytest.raises(AuthenticationFailed) as info:
        asyncio.run(main())
    check(info.value, auth_server.port)


def test_a_wrong_password_is_the_authentication_error_without_the_password(auth_server: RedisServer) -> None:
    wrong = "wr0ng-Pass-Word"
    with Delayer(f"redis://:{wrong}@127.0.0.1:{auth_server.port}/0") as d:
        for call in CALLS.values():
            with pytest.raises(AuthenticationFailed, match="refused the credentials") as info:
                call(d)
            assert wrong not in str(info.value)
