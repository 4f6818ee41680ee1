"""The asyncio Worker: the same, with async handlers run as tasks."""

import asyncio
import logging
import os

from delayer.aio import Delayer, Delivery, Worker

logging.basicConfig(format="%(message)s")


async def send_email(job: Delivery) -> None:
    print(f"{job.topic} {job.id} {job.text}", flush=True)  # your work here; raise to retry later


async def main() -> None:
    async with Delayer(os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0")) as d:
        worker = Worker(d, concurrency=100, ttr=60)
        worker.handle("email", send_email)
        await worker.run()  # until SIGTERM / SIGINT


if __name__ == "__main__":
    asyncio.run(main())
