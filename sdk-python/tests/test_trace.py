"""Trace context across the delay (issue 22): a ``traceparent`` given at push
reaches every consumer (pop, bpop, reserve, reserve_many, lookup, both
Workers), a malformed one is refused at push, one found malformed in Redis is
handed out as absent; with OpenTelemetry present a push takes the current
span's context and the Worker's consumer span is the producer span's child."""

from __future__ import annotations

import asyncio
import logging
from typing import Iterator, List, Optional, Tuple

import pytest
import redis

import delayer.aio as aio
from delayer import Delayer, InvalidArgument, Job, Worker, _trace

from conftest import bucket, move_until, run
from workerkit import WITHIN, Recorder, Running, Server, wait_for

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BAD = [
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # another version
    "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",  # all-zero span id
    TP + "-",
    "not one",
]


@pytest.fixture
def d(url: str) -> Iterator[Delayer]:
    with Delayer(url) as client:
        yield client


def test_every_consumer_gets_the_traceparent_pushed(d: Delayer, raw: "redis.Redis") -> None:
    d.push("t", "a", 0, "x", traceparent=TP)
    d.push_many([Job("t", "b", 0, traceparent=TP), Job("t", "c", 0)])
    assert raw.hget(bucket("a"), "traceparent") == TP.encode()
    assert raw.hget(bucket("b"), "traceparent") == TP.encode()
    assert raw.hget(bucket("c"), "traceparent") is None, "absent: no field"
    assert d.job("t", "a").traceparent == TP
    move_until(raw, 3)
    first = d.pop("t")
    second = d.bpop("t", 1)
    assert first is not None and second is not None
    assert (first.id, first.traceparent, second.id, second.traceparent) == ("a", TP, "b", TP)
    third = d.reserve("t", 30)
    assert third is not None and (third.id, third.traceparent) == ("c", None)

    d.push_many([Job("u", "d", 0, traceparent=TP)])
    move_until(raw, 1)
    _, jobs = d.reserve_many("u", 30, 10)
    assert [(j.id, j.traceparent) for j in jobs] == [("d", TP)]


def test_the_asyncio_client_carries_it_too(url: str, raw: "redis.Redis") -> None:
    async def main() -> Tuple[Optional[str], Optional[str]]:
        async with aio.Delayer(url) as d:
            await d.push("t", "a", 0, traceparent=TP)
            await d.push_many([Job("t", "b", 0, traceparent=TP)])
            move_until(raw, 2)
            popped, reserved = await d.pop("t"), await d.reserve("t", 30)
            assert popped is not None and reserved is not None
            return popped.traceparent, reserved.traceparent

    assert run(main) == (TP, TP)


@pytest.mark.parametrize("bad", BAD)
def test_a_malformed_traceparent_is_refused_and_nothing_is_written(
    url: str, d: Delayer, raw: "redis.Redis", bad: str
) -> None:
    with pytest.raises(InvalidArgument, match="traceparent"):
        d.push("t", "x", 0, traceparent=bad)
    with pytest.raises(InvalidArgument, match=r"jobs\[1\]: traceparent"):
        d.push_many([Job("t", "y", 0), Job("t", "z", 0, traceparent=bad)])
    assert not raw.exists(bucket("x"), bucket("y"), bucket("z"))

    async def main() -> None:
        async with aio.Delayer(url) as a:
            with pytest.raises(InvalidArgument, match="traceparent"):
                await a.push("t", "x", 0, traceparent=bad)

    run(main)


def test_a_malformed_traceparent_in_redis_is_handed_out_as_absent(
    d: Delayer, raw: "redis.Redis", caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_trace, "_warned", False)
    hostile = [b"\xff\xfe garbage", b"0" * 100_000, TP.upper().encode()]
    for i, value in enumerate(hostile):
        d.push("t", f"h{i}", 0)
        raw.hset(bucket(f"h{i}"), "traceparent", value)
    assert d.job("t", "h0").traceparent is None
    move_until(raw, 3)
    with caplog.at_level(logging.WARNING, logger="delayer"):
        got = [d.pop("t"), d.reserve("t", 30), d.pop("t")]
    assert [(m.id, m.traceparent) for m in got if m is not None] == [("h0", None), ("h1", None), ("h2", None)]
    said = [r for r in caplog.records if "traceparent" in r.getMessage()]
    assert len(said) == 1, "said once per process"


@pytest.mark.parametrize("at_most_once", [False, True])
def test_worker_handlers_get_the_traceparent(url: str, d: Delayer, at_most_once: bool) -> None:
    d.push("t", "w1", 0, traceparent=TP)
    d.push("t", "w2", 0, traceparent="")
    seen: List[Tuple[str, Optional[str]]] = []
    hooks = Recorder()
    server = Server(url)
    try:
        w = Worker(d, hooks=hooks, at_most_once=at_most_once)
        w.handle("t", lambda job: seen.append((job.id, job.traceparent)))
        running = Running(w)
        wait_for("both jobs", lambda: len(hooks.names("succeeded")) == 2)
        running.stop()

        async def body() -> None:
            async with aio.Delayer(url) as a:
                await a.push("t", "w3", 0, traceparent=TP)
                w = aio.Worker(a, at_most_once=at_most_once)

                @w.handler("t")
                async def handle(job: aio.Delivery) -> None:
                    seen.append((job.id, job.traceparent))
                    w.stop()

                await asyncio.wait_for(w.run(signals=False), WITHIN)

        run(body)
    finally:
        server.close()
    assert sorted(seen) == [("w1", TP), ("w2", None), ("w3", TP)]
