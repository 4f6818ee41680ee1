"""The optional ``delayer[opentelemetry]`` extra (issue 22), with
opentelemetry-sdk's in-memory exporter: a push inside a span carries that
span's context, and the Worker's consumer span is the producer span's child;
without the library (as when it is not installed) nothing is taken and
handlers still run. Skipped when opentelemetry-sdk is not installed."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict

import pytest
import redis

import delayer.aio as aio
from delayer import Delayer, Delivery, Worker, _trace

from conftest import bucket, run
from workerkit import WITHIN, Recorder, Running, Server, wait_for

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


def work(url: str, d: Delayer, topic: str, handler: Callable[[Delivery], None], jobs: int = 1) -> None:
    """Runs a thread Worker on ``topic`` (the server's moves on a thread) until ``jobs`` jobs ran."""
    hooks = Recorder()
    server = Server(url)
    try:
        w = Worker(d, hooks=hooks)
        w.handle(topic, handler)
        running = Running(w)
        wait_for("the jobs", lambda: len(hooks.names("succeeded")) + len(hooks.names("failed")) == jobs)
        running.stop()
    finally:
        server.close()


def test_the_consumer_span_is_a_child_of_the_producer_span(url: str, d: Delayer, exporter: Any) -> None:
    from opentelemetry import trace

    exporter.clear()
    with trace.get_tracer("test").start_as_current_span("checkout") as producer:
        d.push("orders", "o1", 0, "x")  # no traceparent given: the current span's
        d.push("orders", "o2", 0, "fail", traceparent="")  # opted out
    ctx = producer.get_span_context()
    assert d.job("orders", "o1").traceparent == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    current: Dict[str, Any] = {}

    def handle(job: Delivery) -> None:
        current[job.id] = trace.get_current_span().get_span_context()
        if job.text == "fail":
            raise ValueError("no")

    work(url, d, "orders", handle, jobs=2)
    spans = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()
             if s.name == "orders process" and s.attributes is not None}
    assert set(spans) == {"o1", "o2"}
    o1, o2 = spans["o1"], spans["o2"]
    assert o1.kind == trace.SpanKind.CONSUMER
    assert o1.parent is not None and o1.parent.span_id == ctx.span_id and o1.parent.is_remote
    assert o1.context.trace_id == ctx.trace_id
    assert current["o1"] == o1.context, "the handler runs in its consumer span"
    assert o2.parent is None, "no traceparent: a root span"
    assert o2.status.status_code == trace.StatusCode.ERROR


def test_without_the_library_nothing_is_taken_and_handlers_still_run(
    url: str, d: Delayer, raw: "redis.Redis", exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    monkeypatch.setattr(_trace, "_PROPAGATOR", None)  # as when opentelemetry-api is not installed
    exporter.clear()
    with trace.get_tracer("test").start_as_current_span("checkout"):
        d.push("t", "n1", 0)
    assert raw.hget(bucket("n1"), "traceparent") is None
    work(url, d, "t", lambda job: None)
    assert not [s for s in exporter.get_finished_spans() if s.name == "t process"]


def test_the_asyncio_worker_runs_the_handler_in_its_consumer_span(url: str, d: Delayer, exporter: Any) -> None:
    from opentelemetry import trace

    exporter.clear()
    with trace.get_tracer("test").start_as_current_span("checkout") as producer:
        d.push("mail", "m1", 0)
    current: Dict[str, Any] = {}
    server = Server(url)

    async def body() -> None:
        async with aio.Delayer(url) as a:
            w = aio.Worker(a)

            @w.handler("mail")
            async def handle(job: aio.Delivery) -> None:
                await asyncio.sleep(0)  # the span stays current across awaits
                current[job.id] = trace.get_current_span().get_span_context()
                w.stop()

            await asyncio.wait_for(w.run(signals=False), WITHIN)

    try:
        run(body)
    finally:
        server.close()
    [span] = [s for s in exporter.get_finished_spans() if s.name == "mail process"]
    assert span.parent is not None and span.parent.span_id == producer.get_span_context().span_id
    assert current["m1"] == span.context
