"""What the per-topic layout's tests share (PROTOCOL.md, "The per-topic
layout"): the server's part played with its real scripts (move_topic.lua, and
release_topic.lua's expiry on a topic's keys), a wake-channel listener, and the
exact names the protocol fixes, spelled out here rather than taken from the
SDK's keys module, so a wrong name in the SDK fails these tests."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional, Set

import redis

from conftest import LUA_DIR

#: Generous: the machine running the tests may be slow and busy.
WITHIN = 60.0

MOVE_TOPIC = (LUA_DIR / "move_topic.lua").read_bytes()
RELEASE_TOPIC = (LUA_DIR / "release_topic.lua").read_bytes()


def key(prefix: str, topic: str, kind: str) -> str:
    """``<prefix>{<topic>}:<kind>``, as PROTOCOL.md writes the names."""
    return f"{prefix}{{{topic}}}:{kind}"


def move_topic(raw: "redis.Redis", topic: str, prefix: str = "delayer:") -> int:
    """Run the server's move_topic.lua once on ``topic``; return how many ids it moved."""
    names = [key(prefix, topic, kind) for kind in ("pool", "ready", "reserved", "flow")]
    reply = raw.eval(MOVE_TOPIC, 4, *names, 1000)
    return int(reply[0])  # type: ignore[index]


def move_until(raw: "redis.Redis", topic: str, count: int, prefix: str = "delayer:", within: float = WITHIN) -> int:
    """Run move_topic.lua until ``count`` ids of ``topic`` were moved (polling,
    with a deadline); return how many it moved."""
    moved = 0
    deadline = time.monotonic() + within
    while True:
        moved += move_topic(raw, topic, prefix)
        if moved >= count:
            return moved
        if time.monotonic() > deadline:
            raise AssertionError(f"only {moved} of {count} ids of {topic!r} became due within {within} s")
        time.sleep(0.01)


def expire(raw: "redis.Redis", topic: str, prefix: str = "delayer:") -> List[Any]:
    """The server's expiry of ``topic``'s reservations past their deadline
    (release_topic.lua "expired" on the topic's keys)."""
    reply = raw.eval(
        RELEASE_TOPIC, 5,
        key(prefix, topic, "reserved"), key(prefix, topic, "pool"), key(prefix, topic, "malformed"),
        key(prefix, topic, "dead"), key(prefix, topic, "outcomes"),
        key(prefix, topic, "job:"), "backoff", "expired", 1000,
    )
    assert isinstance(reply, list)
    return reply


def indexed(raw: "redis.Redis", topic: str, due: float, prefix: str = "delayer:") -> float:
    """Assert that ``<prefix>due`` holds a time for ``topic`` no later than a
    push's answered ``due`` time and close to it (under 1 s earlier): a push
    sends its index write with the script, from the client's clock, 100 ms
    early (PROTOCOL.md, "push sends its index write with the script").
    Returns the time held."""
    held = raw.zscore(prefix + "due", topic)
    assert held is not None and due - 1 < held <= due, f"index of {topic!r}: {held}, due {due}"
    return held


class TopicServer:
    """The Delayer server's moves and expiry for every topic of
    ``<prefix>topics`` and every topic announced on ``<prefix>wake``
    (``"<time> <topic>"``, as the scripts announce), every 10 ms on a thread."""

    def __init__(self, url: str, prefix: str = "delayer:") -> None:
        self.raw = redis.Redis.from_url(url, socket_timeout=5)
        self.prefix = prefix
        self.announced: Set[bytes] = set()
        self.pubsub = self.raw.pubsub()
        self.pubsub.subscribe(prefix + "wake")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.done.is_set():
            try:
                while (m := self.pubsub.get_message(timeout=0)) is not None:
                    if m["type"] == "message" and b" " in m["data"]:
                        self.announced.add(m["data"].split(b" ", 1)[1])
                for t in self.raw.smembers(self.prefix + "topics") | self.announced:
                    topic = t.decode()
                    move_topic(self.raw, topic, self.prefix)
                    expire(self.raw, topic, self.prefix)
            except redis.RedisError:
                pass
            self.done.wait(0.01)

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.pubsub.close()
        self.raw.close()


class WakeListener:
    """A subscriber of ``<prefix>wake``, subscribed before the test acts."""

    def __init__(self, raw: "redis.Redis", prefix: str = "delayer:") -> None:
        # Kept: a redis.Redis closes its pool, and so this subscription, when it is collected.
        self.raw = raw
        self.pubsub = raw.pubsub()
        self.pubsub.subscribe(prefix + "wake")
        first = self.pubsub.get_message(timeout=WITHIN)
        assert first is not None and first["type"] == "subscribe", first

    def next(self, within: float = WITHIN) -> Optional[bytes]:
        """The next message published (None if none came within ``within``)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            m = self.pubsub.get_message(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            if m is not None and m["type"] == "message":
                data = m["data"]
                assert isinstance(data, bytes)
                return data
        return None

    def close(self) -> None:
        self.pubsub.close()


def wait_for(what: str, check: Any, within: float = WITHIN) -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        time.sleep(0.01)
