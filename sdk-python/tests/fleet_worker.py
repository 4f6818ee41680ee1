"""A Worker process for test_worker_fleet.py: runs jobs of topic "fleet" and
records every run and every confirmed ack on a Redis of its own (the record
Redis, which no test restarts), so the test can check the whole history.

Environment: DELAYER_URL (the jobs), RECORD_URL (the records), NAME (this
worker's name in the records), CONCURRENCY, TTR, GRACE, SLEEP (seconds each
handler takes). Job ``job-<n>`` fails on its first attempt when n % 10 == 3
and on every attempt when n % 50 == 7. Prints "ready" once running; exits 0
after a graceful stop (SIGTERM / SIGINT).
"""

from __future__ import annotations

import os
import sys
import time

import redis

from delayer import Delayer, Delivery, Worker, WorkerHooks

NAME = os.environ.get("NAME", "w")
record = redis.Redis.from_url(os.environ["RECORD_URL"])
SLEEP = float(os.environ.get("SLEEP", "0.005"))


class Hooks(WorkerHooks):
    def job_acked(self, job: Delivery) -> None:
        record.rpush("events", f"ack {job.id} {NAME} {job.attempts}")

    def connection_lost(self, error: Exception, pause: float) -> None:
        record.rpush("lost", f"{NAME} {pause}")

    def stopped(self, abandoned: int) -> None:
        record.rpush("stopped", f"{NAME} {abandoned}")


def handle(job: Delivery) -> None:
    record.rpush("events", f"run {job.id} {NAME} {job.attempts}")
    time.sleep(SLEEP)
    n = int(job.id.split("-")[1])
    if n % 50 == 7:
        raise RuntimeError(f"always fails {n}")
    if n % 10 == 3 and job.attempts == 1:
        raise RuntimeError(f"fails once {n}")
    # Recorded before the handler returns, so before its ack can be sent: a
    # worker killed between its ack and the job_acked hook leaves this.
    record.rpush("events", f"ok {job.id} {NAME} {job.attempts}")


def main() -> None:
    d = Delayer(os.environ["DELAYER_URL"])
    w = Worker(
        d,
        concurrency=int(os.environ.get("CONCURRENCY", "8")),
        ttr=float(os.environ.get("TTR", "3")),
        grace=float(os.environ.get("GRACE", "10")),
        hooks=Hooks(),
    )
    w.handle("fleet", handle)
    print("ready", flush=True)
    w.run()
    d.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
