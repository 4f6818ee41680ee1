"""The Python Workers (threads, or ``--aio`` asyncio) behind the worker
conformance test (test_conformance_worker.py; the protocol is in
../README.md, "The worker drivers").

Usage: python_worker.py [--aio] (--url URL --prefix P | --config FILE)
--topic T --concurrency N --ttr-ms N --grace-ms N

Runs one Worker on topic T until SIGTERM, writing one JSON line per hook
call on stdout. The handler does what the job's body says.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from typing import Any

import delayer
import delayer.aio
from delayer.worker import Delivery, WorkerHooks

_out = threading.Lock()


def emit(ev: str, **fields: Any) -> None:
    with _out:
        sys.stdout.write(json.dumps({"ev": ev, **fields}) + "\n")
        sys.stdout.flush()


class Panic(BaseException):
    """Python's nearest to a panic: not an Exception, so ``except Exception`` misses it."""


class Record(WorkerHooks):
    """Every hook, as a line; the started hook of a job whose id starts with ``hookfail`` raises after its line."""

    def job_started(self, job: Any) -> None:
        emit("started", id=job.id, attempts=job.attempts)
        if job.id.startswith("hookfail"):
            raise RuntimeError("a hook that fails")

    def job_succeeded(self, job: Any, seconds: float) -> None:
        emit("succeeded", id=job.id, attempts=job.attempts)

    def job_acked(self, job: Any) -> None:
        emit("acked", id=job.id, attempts=job.attempts)

    def job_failed(self, job: Any, error: BaseException, seconds: float) -> None:
        emit("failed", id=job.id, attempts=job.attempts)

    def job_lost(self, job: Any, what: str) -> None:
        emit("not_held", id=job.id, attempts=job.attempts)

    def job_touched(self, job: Any) -> None:
        emit("touched", id=job.id, attempts=job.attempts)

    def job_released_at_stop(self, job: Any) -> None:
        emit("released_at_stop", id=job.id, attempts=job.attempts)

    def connection_lost(self, error: Any, pause: float) -> None:
        emit("connection_lost", retry_in=pause)

    def reconnected(self) -> None:
        emit("reconnected")

    def stopping(self, in_flight: int) -> None:
        emit("stopping")

    def stopped(self, abandoned: int) -> None:
        emit("stopped")


def behave(job: Delivery) -> float:
    """Raise as the body says; else the seconds to sleep before succeeding."""
    body = job.body.decode()
    if body == "fail" or (body == "fail-once" and job.attempts == 1):
        raise RuntimeError("boom")
    if body == "panic":
        raise Panic("boom")
    return int(body.split(":", 1)[1]) / 1000 if body.startswith("sleep:") else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--aio", action="store_true")
    p.add_argument("--url")
    p.add_argument("--prefix", default="delayer:")
    p.add_argument("--config")
    p.add_argument("--topic", required=True)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--ttr-ms", type=int, default=60_000)
    p.add_argument("--grace-ms", type=int, default=25_000)
    o = p.parse_args()
    settings = dict(concurrency=o.concurrency, ttr=o.ttr_ms / 1000, grace=o.grace_ms / 1000, hooks=Record())
    if o.aio:
        asyncio.run(run_aio(o, settings))
        return
    client = delayer.Delayer.from_config(o.config) if o.config else delayer.Delayer(o.url, prefix=o.prefix)
    worker = delayer.Worker(client, **settings)  # type: ignore[arg-type]

    def handler(job: Delivery) -> None:
        time.sleep(behave(job))

    worker.handle(o.topic, handler)
    emit("running")
    worker.run()


async def run_aio(o: argparse.Namespace, settings: dict) -> None:
    client = delayer.aio.Delayer.from_config(o.config) if o.config else delayer.aio.Delayer(o.url, prefix=o.prefix)
    worker = delayer.aio.Worker(client, **settings)

    async def handler(job: Any) -> None:
        await asyncio.sleep(behave(job))

    worker.handle(o.topic, handler)
    emit("running")
    await worker.run()


if __name__ == "__main__":
    main()
