"""An asyncio worker: takes the jobs of topic "email" as they come due.

The same loop as worker.py, with the asyncio client: on ConnectionFailed
(Redis went away) wait a little, longer each time, and carry on.
"""

import asyncio
import os
import sys

from delayer import ConnectionFailed, Message
from delayer.aio import Delayer


async def handle(job: Message) -> None:
    print(f"{job.topic} {job.id} {job.text}", flush=True)  # your work here


async def main() -> None:
    async with Delayer(os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0")) as d:
        pause = 0.1
        while True:
            try:
                job = await d.bpop("email", timeout=30)  # None after 30 s without a job
            except ConnectionFailed as e:
                print(f"Redis unavailable, retrying in {pause:.1f} s: {e}", file=sys.stderr, flush=True)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)
                continue
            pause = 0.1
            if job is not None:
                await handle(job)


if __name__ == "__main__":
    asyncio.run(main())
