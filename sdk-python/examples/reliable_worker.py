"""A worker that loses no job: reserve, do the work, then ack.

A job stays reserved until it is acked; if the worker dies first, or its ttr
runs out, the Delayer server hands the job out again. So the work must be safe
to do twice. When Redis goes away, calls raise ConnectionFailed: wait a little,
longer each time, and carry on (a job whose ack was lost comes back).
"""

import os
import sys
import time

from delayer import ConnectionFailed, Delayer, ReservedMessage


class PermanentError(Exception):
    """A job that can never succeed (bad data): no point in trying again."""


def handle(job: ReservedMessage) -> None:
    print(f"{job.topic} {job.id} {job.text}", flush=True)  # your work here


def work(d: Delayer, job: ReservedMessage) -> None:
    try:
        handle(job)
    except PermanentError:
        d.bury(job)  # straight to the topic's dead letters
    except Exception:
        d.release(job)  # again after its backoff (or release(job, delay=30))
    else:
        d.ack(job)  # done: the job is deleted


def main() -> None:
    d = Delayer(os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0"))
    pause = 0.1
    while True:
        try:
            job = d.breserve("email", ttr=60, timeout=30)  # None after 30 s without a job
            pause = 0.1
            if job is not None:
                work(d, job)
        except ConnectionFailed as e:
            print(f"Redis unavailable, retrying in {pause:.1f} s: {e}", file=sys.stderr, flush=True)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


if __name__ == "__main__":
    main()
