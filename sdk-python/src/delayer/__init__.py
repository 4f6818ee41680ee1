"""Delayer: a delayed-job queue on Redis (Python SDK).

Push a job with a delay; when it is due, the Delayer server moves it to its
topic's ready queue, where :meth:`Delayer.pop` / :meth:`Delayer.bpop` hand it
to exactly one consumer (at most once), or :meth:`Delayer.reserve` /
:meth:`Delayer.breserve` hand it out until :meth:`Delayer.ack` (at least
once). See ``docs/PROTOCOL.md`` for the data in Redis.

>>> from delayer import Delayer
>>> with Delayer("redis://127.0.0.1:6379/0") as d:          # doctest: +SKIP
...     d.push("email", "order-42:confirm", 30, b"...")
...     msg = d.bpop("email", timeout=5)

The asyncio twin is :class:`delayer.aio.Delayer`. :class:`Worker` (and
:class:`delayer.aio.Worker`) runs a handler per topic, with retries,
heartbeats, graceful stop and reconnects.
"""

from .client import Delayer
from .errors import (AuthenticationFailed, ConfigError, ConnectionFailed, DelayerError, IdTakenError, InvalidArgument,
                     NotReplicatedError, ProtocolError)
from .keys import DEFAULT_PREFIX, Keys
from .models import (DEFAULT_MAX_ATTEMPTS, DEFAULT_READY_MAX_LIFETIME, Backoff, DeadLetter, FlowState, Job, Message,
                     RateLimit, ReservedMessage, Taken)
from .worker import Delivery, Worker, WorkerHooks

__all__ = [
    "Delayer", "Worker", "Delivery", "WorkerHooks", "Job", "Message", "Backoff", "ReservedMessage", "DeadLetter",
    "Taken", "FlowState", "RateLimit", "DEFAULT_MAX_ATTEMPTS", "Keys", "DEFAULT_PREFIX", "DEFAULT_READY_MAX_LIFETIME",
    "DelayerError", "InvalidArgument", "ConfigError", "ConnectionFailed", "AuthenticationFailed", "ProtocolError",
    "IdTakenError", "NotReplicatedError",
]

__version__ = "2.0.0"
