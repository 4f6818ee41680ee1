"""Value types shared by the synchronous and asynchronous clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ._names import name_bytes
from ._rules import MAX_SECONDS, delay_ms
from .errors import InvalidArgument

__all__ = [
    "Message", "Job", "Backoff", "ReservedMessage", "DeadLetter", "Taken", "FlowState", "RateLimit",
    "DEFAULT_READY_MAX_LIFETIME", "DEFAULT_MAX_ATTEMPTS",
]

#: Default ``ready_max_lifetime``: 7 days, in seconds.
DEFAULT_READY_MAX_LIFETIME = 604800
#: Reservations a job gets when its pusher sets none (reserve.lua's default; here for reference).
DEFAULT_MAX_ATTEMPTS = 25


class _Names:
    """``id_bytes`` and ``topic_bytes`` for every type that carries a job's names, written once."""

    id: str
    topic: str

    @property
    def id_bytes(self) -> bytes:
        """The id as Redis holds it. An id that is not UTF-8 (written by a
        Delayer 1.x or PHP client) is :attr:`id` with surrogate escapes, and
        these are its bytes; pass :attr:`id` itself back to any call."""
        return name_bytes(self.id)

    @property
    def topic_bytes(self) -> bytes:
        """The topic as Redis holds it (as :attr:`id_bytes`)."""
        return name_bytes(self.topic)


class _Body:
    """``text`` for every type that carries a job body, written once."""

    body: bytes

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (raises ``UnicodeDecodeError`` if it is not)."""
        return self.body.decode("utf-8")


@dataclass(frozen=True)
class Message(_Body, _Names):
    """A job handed out by ``pop`` / ``bpop``; it is gone from Redis already."""

    #: The job id given to ``push`` (not UTF-8: with surrogate escapes, see :attr:`id_bytes`).
    id: str
    #: The topic the job was pushed to (as :attr:`id`).
    topic: str
    #: The job body, exactly the bytes pushed.
    body: bytes
    #: The producer's W3C trace context given at push, or None (also for a malformed one).
    traceparent: Optional[str] = None


@dataclass(frozen=True)
class Job:
    """One job for ``push_many``; the fields mean what ``push``'s arguments mean."""

    #: Ready queue the job goes to when due.
    topic: str
    #: Caller-chosen job id, unique per job.
    id: str
    #: Seconds from now until the job is due (rounded to the millisecond).
    delay: float
    #: Opaque payload; ``str`` is encoded as UTF-8.
    body: Union[bytes, str] = b""
    #: Whole seconds a due job may wait in its ready queue before it expires.
    ready_max_lifetime: int = DEFAULT_READY_MAX_LIFETIME
    #: Reservations allowed before dead letters (0: no limit); None: reserve's default (25).
    max_attempts: Optional[int] = None
    #: The wait before a retry; None: reserve's default (exponential, 1 s doubling up to 1 h).
    backoff: Optional["Backoff"] = None
    #: The producer's W3C trace context, as ``push``'s ``traceparent``.
    traceparent: Optional[str] = None


@dataclass(frozen=True)
class Backoff:
    """How long a reserved job waits before its next attempt after a failed one.

    (A release without a delay, or a ttr run out.) Make one with
    :meth:`fixed` or :meth:`exponential` (seconds, rounded as a push delay);
    without one a job retries exponentially from 1 s, up to 1 h.
    """

    #: ``"fixed"`` or ``"exponential"``.
    kind: str
    #: fixed: the wait; exponential: the first wait, doubled after each failure.
    backoff_ms: int
    #: The longest wait (equal to ``backoff_ms`` for fixed).
    backoff_max_ms: int

    def __post_init__(self) -> None:
        # The fields go to Redis as they are: even one built field by field must suit release.lua.
        most = MAX_SECONDS * 1000
        if self.kind not in ("fixed", "exponential"):
            raise InvalidArgument(f"backoff kind must be 'fixed' or 'exponential', got {self.kind!r}")
        for name in ("backoff_ms", "backoff_max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
                raise InvalidArgument(f"backoff {name} must be an int from 0 to {most}, got {value!r}")
        if self.backoff_max_ms < self.backoff_ms:
            raise InvalidArgument(
                f"backoff max ({self.backoff_max_ms} ms) must not be below its first delay ({self.backoff_ms} ms)"
            )
        if self.kind == "fixed" and self.backoff_max_ms != self.backoff_ms:
            raise InvalidArgument("a fixed backoff has one delay: backoff_max_ms must equal backoff_ms")

    @classmethod
    def fixed(cls, delay: float) -> "Backoff":
        """Always wait ``delay`` seconds (0 to 10 years) before a retry."""
        ms = delay_ms(delay, "backoff delay")
        return cls("fixed", ms, ms)

    @classmethod
    def exponential(cls, base: float, max: float) -> "Backoff":
        """Wait ``base``, ``2 * base``, ``4 * base``, ... seconds, never more than ``max`` (not below ``base``)."""
        base_ms = delay_ms(base, "backoff base")
        max_ms = delay_ms(max, "backoff max")
        if max_ms < base_ms:
            raise InvalidArgument(f"backoff max ({max!r} s) must not be below its base ({base!r} s)")
        return cls("exponential", base_ms, max_ms)


@dataclass(frozen=True)
class ReservedMessage(_Body, _Names):
    """A job handed out by ``reserve`` / ``breserve``: still in Redis, reserved.

    No other consumer gets it until ``ack``, ``release`` or ``bury``, or
    until :attr:`deadline` passes (then it is delivered again). Pass this
    object to those calls, so that they act on this reservation only.
    """

    #: ``id``, ``topic`` and ``body`` as on :class:`Message`.
    id: str
    topic: str
    body: bytes
    #: Reservations so far, this one included (1 on the first delivery).
    attempts: int
    #: Reservations allowed before the job goes to dead letters; 0: no limit.
    max_attempts: int
    #: Names this reservation: a worker whose reservation ran out cannot end the next one's.
    receipt: str
    #: When the reservation runs out: Unix seconds by Redis's clock.
    deadline: float
    #: The producer's W3C trace context given at push, or None (as :attr:`Message.traceparent`).
    traceparent: Optional[str] = None

    @property
    def is_last_attempt(self) -> bool:
        """Whether a failure now (release without bury) sends the job to dead letters."""
        return self.max_attempts > 0 and self.attempts >= self.max_attempts


@dataclass(frozen=True)
class DeadLetter(_Body, _Names):
    """A job on its topic's dead-letter list: buried, or out of attempts.

    It stays there (no expiry) until ``requeue_dead`` or ``purge_dead``.
    """

    id: str
    topic: str
    body: bytes
    #: How many times it was reserved.
    attempts: int
    #: ``"buried"`` or ``"max_attempts"``.
    reason: str
    #: When it died: Unix seconds by Redis's clock.
    dead_at: float
    #: Why its last attempt failed, as a worker said it (or ``"ttr expired"``); None if none said.
    last_error: Optional[str] = None


@dataclass(frozen=True)
class Taken(_Names):
    """An id a push with ``if_absent=True`` found taken: nothing was written for it.

    (In the classic layout ids are global: the job holding it may be on another topic.)
    """

    #: The id pushed.
    id: str
    #: The topic of the job holding the id ("" if its data is unreadable).
    topic: str
    #: When that job is due (Unix seconds, Redis's clock) while it still
    #: waits; None when it does not wait any more (ready, reserved or dead).
    due: Optional[float]


@dataclass(frozen=True)
class RateLimit:
    """A topic's rate limit, as ``set_rate_limit`` stored it: at most
    ``burst + per_second * t`` of the topic's jobs become ready in any ``t``
    seconds, however many servers move them (one token bucket in Redis).

    It paces jobs becoming ready, not handed out: jobs already in the ready
    queue go out at consumer speed.
    """

    #: Jobs per second (may be a fraction: 0.5 is one job every two seconds).
    per_second: float
    #: How many jobs may become ready at once after a quiet spell.
    burst: int


@dataclass(frozen=True)
class FlowState:
    """A topic's flow control, as ``flow`` (or the ``pause`` / ``resume`` /
    ``set_rate_limit`` behind it) left it: whether it is paused, since when,
    its rate limit, and what it holds back.

    While a topic is paused nothing of it is handed out (pop, reserve and
    their waits give nothing, a Worker starts nothing); its jobs keep coming
    due and wait, and a resume hands them out again, in due order. While it
    has a rate limit its due jobs become ready at that pace, in due order;
    those waiting for their turn are held too. Paused wins over a limit: at
    the resume the backlog drains at the limit.
    """

    #: When the pause began (Unix seconds, Redis's clock); None while the topic runs
    #: (0.0 for a pause written by hand whose ``paused`` is no time).
    paused_since: Optional[float]
    #: Due jobs held back (by the pause or the rate limit): in the per-topic
    #: layout those of the topic's pool due by now (0 while it runs unlimited);
    #: in the classic layout those the server set aside in the topic's flow
    #: pool (until it drains them).
    held: int
    #: Whether this call changed the state (a pause of a running topic, a resume
    #: of a paused one, a new rate or burst, a clear of a limited topic);
    #: always False for a read.
    changed: bool
    #: Redis's clock at the call (Unix seconds).
    at: float
    #: The topic's rate limit after the call; None when it has none (or its
    #: flow hash holds one that is no number: data in Redis is read, never a crash).
    rate_limit: Optional[RateLimit] = None

    @property
    def paused(self) -> bool:
        """Whether the topic is paused."""
        return self.paused_since is not None
