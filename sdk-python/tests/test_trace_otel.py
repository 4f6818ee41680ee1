"""The optional ``delayer[opentelemetry]`` extra (issue 22), with
opentelemetry-sdk's in-memory exporter: a push inside a span carries that
span's context, and the Worker's consumer span is the producer span's child;
without the library (as when it is not installed) nothing is taken and
handlers still run. Skipped when opentelemetry-sdk is not installed."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from delayer import Delayer, Worker, _trace

from conftest import bucket
from workerkit import Recorder, Running, Server, wait_for

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed")


@pytest.fixture
def d(url: str) -> Any:
    with Delayer(url) as client:
        yield client


@pytest.fixture(scope="module")
def exporter() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, otel_sdk.TracerProvider):
        provider = otel_sdk.TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_the_consumer_span_is_a_child_of_the_producer_span(url: str, d: Delayer, exporter: Any) -> None:
    from opentelemetry import trace

    exporter.clear()
    with trace.get_tracer("test").start_as_current_span("checkout") as producer:
        d.push("orders", "o1", 0, "x")  # no traceparent given: the current span's
    ctx = producer.get_span_context()
    assert d.job("orders", "o1").traceparent == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    hooks = Recorder()
    server = Server(url)
    try:
        w = Worker(d, hooks=hooks)
        w.handle("orders", lambda job: None)
        running = Running(w)
        wait_for("the job", lambda: len(hooks.names("acked")) == 1)
        running.stop()
    finally:
        server.close()
    consumer = [s for s in exporter.get_finished_spans() if s.name == "orders process"]
    assert len(consumer) == 1
    span = consumer[0]
    assert span.kind == trace.SpanKind.CONSUMER
    assert span.parent is not None and span.parent.span_id == ctx.span_id
    assert span.context.trace_id == ctx.trace_id
    assert span.attributes is not None and span.attributes["messaging.message.id"] == "o1"


def test_without_the_library_nothing_is_taken_and_handlers_still_run(
    url: str, d: Delayer, raw: "redis.Redis", exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    monkeypatch.setattr(_trace, "_PROPAGATOR", None)  # as when opentelemetry-api is not installed
    exporter.clear()
    with trace.get_tracer("test").start_as_current_span("checkout"):
        d.push("t", "n1", 0)
    assert raw.hget(bucket("n1"), "traceparent") is None
    hooks = Recorder()
    server = Server(url)
    try:
        w = Worker(d, hooks=hooks)
        w.handle("t", lambda job: None)
        running = Running(w)
        wait_for("the job", lambda: len(hooks.names("acked")) == 1)
        running.stop()
    finally:
        server.close()
    assert not [s for s in exporter.get_finished_spans() if s.name == "t process"]
