"""A worker: takes the jobs of topic "email" as they come due, one at a time.

Each job is handed to one worker at most once (bpop deletes it). When Redis
goes away (a restart, a network cut) the call raises ConnectionFailed: wait a
little, longer each time, and carry on; once Redis is back the next call works.
"""

import os
import sys
import time

from delayer import ConnectionFailed, Delayer, Message


def handle(job: Message) -> None:
    print(f"{job.topic} {job.id} {job.text}", flush=True)  # your work here


def main() -> None:
    d = Delayer(os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0"))
    pause = 0.1
    while True:
        try:
            job = d.bpop("email", timeout=30)  # None after 30 s without a job
        except ConnectionFailed as e:
            print(f"Redis unavailable, retrying in {pause:.1f} s: {e}", file=sys.stderr, flush=True)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)
            continue
        pause = 0.1
        if job is not None:
            handle(job)


if __name__ == "__main__":
    main()
