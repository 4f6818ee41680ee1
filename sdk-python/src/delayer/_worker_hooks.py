"""What users of both Workers see besides their handlers: the job handed
over (:class:`Delivery`), the hooks (logging, metrics) and how a failed
attempt is worded."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .errors import DelayerError, InvalidArgument
from .models import Message, ReservedMessage, _Body, _Names

log = logging.getLogger("delayer.worker")


@dataclass(eq=False)
class Delivery(_Body, _Names):
    """A job a Worker hands to a handler: the job's data (``id_bytes``,
    ``topic_bytes`` and ``text`` as on :class:`delayer.Message`), and at
    least once its reservation (``extend`` is each Worker's)."""

    #: What reserve (at least once) or pop (at most once) returned.
    message: Union[ReservedMessage, Message]
    #: The ttr of the reservation, in seconds (0 at most once).
    ttr: float
    started: float = field(default=0.0, repr=False)
    touch_at: float = field(default=math.inf, repr=False)

    @property
    def id(self) -> str:  # type: ignore[override]
        return self.message.id

    @property
    def topic(self) -> str:  # type: ignore[override]
        return self.message.topic

    @property
    def body(self) -> bytes:  # type: ignore[override]
        return self.message.body

    @property
    def traceparent(self) -> Optional[str]:
        """The producer's W3C trace context given at push, or None: the
        parent of the handler's span (``delayer[opentelemetry]`` makes it so)."""
        return self.message.traceparent

    @property
    def attempts(self) -> int:
        """Deliveries so far, this one included (1 at most once)."""
        return self.message.attempts if isinstance(self.message, ReservedMessage) else 1

    @property
    def reserved(self) -> ReservedMessage:
        """The reservation (at least once); InvalidArgument at most once."""
        if not isinstance(self.message, ReservedMessage):
            raise InvalidArgument("a job popped at most once has no reservation to extend")
        return self.message


def error_text(error: BaseException) -> str:
    """How a failed attempt is recorded on the job: ``"ClassName: message"``."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class WorkerHooks:
    """What a Worker tells about its work: subclass and override for logging
    and metrics (the defaults log to ``delayer.worker``; a hook that raises is
    logged and ignored). The same hooks, in the same order, as the other SDKs'
    (PROTOCOL.md, "The Worker runtime"); they run where the event happens."""

    def job_started(self, job: Delivery) -> None:
        """A handler is about to run ``job``."""

    def job_succeeded(self, job: Delivery, seconds: float) -> None:
        """``job``'s handler returned after ``seconds``; its ack is on its way."""

    def job_acked(self, job: Delivery) -> None:
        """``job``'s ack reached Redis while its reservation was held: it is done
        and deleted (at least once; sent with the next fetch, or at once when idle)."""

    def job_failed(self, job: Delivery, error: BaseException, seconds: float) -> None:
        """``job``'s handler raised ``error``; the job was released with its backoff
        (or went to dead letters on its last attempt; at most once: it is gone)."""
        log.warning("job %r of topic %r failed (attempt %d): %s", job.id, job.topic, job.attempts, error_text(error))

    def job_lost(self, job: Delivery, what: str) -> None:
        """``what`` (ack, release, touch) found ``job``'s reservation no longer
        held: its ttr ran out and it may run elsewhere (raise the ttr, or extend)."""
        log.warning("job %r of topic %r: %s found its reservation gone (ttr ran out?)", job.id, job.topic, what)

    def job_touched(self, job: Delivery) -> None:
        """The worker touched ``job``'s reservation (its handler ran past half its ttr): it is held for another ttr."""

    def connection_lost(self, error: DelayerError, pause: float) -> None:
        """A call to Redis failed; the worker tries again after ``pause`` seconds."""
        log.warning("Redis unavailable, retrying in %.1f s: %s", pause, error)

    def reconnected(self) -> None:
        """Redis answers again after :meth:`connection_lost`."""
        log.info("Redis answers again")

    def job_released_at_stop(self, job: Delivery) -> None:
        """The grace period of a stop ran out with ``job`` not finished: its
        reservation was released, due at once, for another worker."""
        log.warning("job %r of topic %r released at stop: its handler outran the grace period", job.id, job.topic)

    def stopping(self, in_flight: int) -> None:
        """A stop was asked for; ``in_flight`` handlers are still running."""
        log.info("stopping: waiting for %d running handlers", in_flight)

    def stopped(self, abandoned: int) -> None:
        """The worker stopped; ``abandoned`` jobs whose handler did not finish within the grace period were released."""
        log.info("stopped (%d unfinished jobs released)", abandoned)


def overridden(hooks: WorkerHooks, name: str) -> Optional[Callable[..., None]]:
    """``hooks``'s method ``name``, or None when it is WorkerHooks' own (a no-op)."""
    if getattr(type(hooks), name) is getattr(WorkerHooks, name):
        return None
    method: Callable[..., None] = getattr(hooks, name)
    return method


def call_hook(hook: Callable[..., None], *args: Any) -> None:
    """Run a hook; its failure is logged, never the worker's."""
    try:
        hook(*args)
    except Exception:
        log.exception("a worker hook (%s) raised", getattr(hook, "__name__", hook))
