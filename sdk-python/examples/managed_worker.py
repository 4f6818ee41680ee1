"""A Worker runs the consumer loop for you: it reserves jobs, runs your
handler on a pool of threads and acks them; a handler that raises has its
job retried after its backoff, with the error kept on the job. It touches
long-running jobs, reconnects when Redis goes away, and stops gracefully on
SIGTERM or Ctrl-C (running jobs finish, those left go back to the queue).
"""

import logging
import os

from delayer import Delayer, Delivery, Worker

logging.basicConfig(format="%(message)s")  # failures and lost connections are logged as warnings


def send_email(job: Delivery) -> None:
    print(f"{job.topic} {job.id} {job.text}", flush=True)  # your work here; raise to retry later


def main() -> None:
    d = Delayer(os.environ.get("DELAYER_URL", "redis://127.0.0.1:6379/0"))
    worker = Worker(d, concurrency=10, ttr=60)
    worker.handle("email", send_email)
    worker.run()  # until SIGTERM / SIGINT
    d.close()


if __name__ == "__main__":
    main()
