"""Trace context across the delay: a job's W3C ``traceparent``.

A push may carry the producer's trace context; every consumer gets it back
(``.traceparent``), so its span can be a child of the producer's however
long the job waited. Here: the rule (checked at push), the reading from
Redis (untrusted: a malformed value is absent, said once on the ``delayer``
logger), and the optional OpenTelemetry link (``delayer[opentelemetry]``: a
push takes the current span's context, a Worker's handler runs in a
consumer span whose parent is the producer's).
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, ContextManager, Dict, Optional, Union

from .errors import InvalidArgument
from .models import Message, ReservedMessage

try:  # the optional extra: delayer[opentelemetry]
    # (ignored for type checks where the extra is not installed)
    from opentelemetry import trace as _otel_trace  # type: ignore[import-not-found, unused-ignore]
    from opentelemetry.trace.propagation.tracecontext import (  # type: ignore[import-not-found, unused-ignore]
        TraceContextTextMapPropagator,
    )

    _PROPAGATOR: Optional[TraceContextTextMapPropagator] = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover - exercised by the tests without the extra
    _PROPAGATOR = None

_log = logging.getLogger("delayer")
_RULE = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
_warned = False
_tracer: Any = None  # taken at the first consumer span
_NOTHING: ContextManager[None] = contextlib.nullcontext()


def check_traceparent(value: object) -> str:
    """Check a push's ``traceparent``: "" (none), or the W3C form with
    version 00, lower-case hex and ids that are not all zeros."""
    if not isinstance(value, str):
        raise InvalidArgument(f"traceparent must be a str, not {type(value).__name__}")
    if value and not _RULE.fullmatch(value):
        raise InvalidArgument(
            f'traceparent must be "00-<32 hex>-<16 hex>-<2 hex>" (lower-case, ids not all zeros), not {value[:64]!r}'
        )
    return value


def outgoing(value: object) -> str:
    """push.lua's traceparent: ``value`` checked; None: OpenTelemetry's current one, or ""."""
    if value is None:
        return current() or ""
    return check_traceparent(value)


def current() -> Optional[str]:
    """The current OpenTelemetry span's ``traceparent``, or None (no library, no valid span)."""
    if _PROPAGATOR is None:
        return None
    carrier: Dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    found = carrier.get("traceparent")
    return found if found and _RULE.fullmatch(found) else None


def from_redis(job_id: str, value: object) -> Optional[str]:
    """The traceparent a script read from job ``job_id``'s hash ("" when
    absent): None when absent or malformed (said once per process)."""
    global _warned
    if value in (b"", ""):
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if isinstance(text, str) and _RULE.fullmatch(text):
        return text
    if not _warned:
        _warned = True
        size = len(value) if isinstance(value, (bytes, str)) else 0
        shown = text[:64] if isinstance(text, str) else repr(value)[:64]
        _log.warning(
            "job %r carries a traceparent that is not one (%r, %d bytes); it is handed out without it "
            "(further malformed traceparents not logged)", job_id, shown, size
        )
    return None


def consumer_span(job: Union[Message, ReservedMessage]) -> ContextManager[Any]:
    """A consumer span around ``job``'s handler, child of the producer's, when OpenTelemetry is present."""
    global _tracer
    if _PROPAGATOR is None:
        return _NOTHING
    if _tracer is None:  # once: a ProxyTracer follows a provider set later
        _tracer = _otel_trace.get_tracer("delayer")
    topic, traceparent = job.topic, job.traceparent
    parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    attributes = {"messaging.system": "delayer", "messaging.destination.name": topic, "messaging.message.id": job.id}
    span = _tracer.start_span(f"{topic} process", parent, _otel_trace.SpanKind.CONSUMER, attributes)
    # No provider and no trace around (the no-op tracer's invalid span):
    # making it current would change nothing, so it costs nothing per job.
    if parent is None and not span.is_recording() and not span.get_span_context().is_valid:
        return _NOTHING
    return _otel_trace.use_span(span, end_on_exit=True)  # as start_as_current_span
