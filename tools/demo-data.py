#!/usr/bin/env python3
"""Fills a running Delayer with a realistic set of jobs, through its HTTP API,
for a demo or the dashboard's screenshots (tools/screenshots.py):

- orders.close   orders auto-closed 30 min to 6 h after checkout (JSON bodies)
- sms.remind     appointment reminders, some due now (ready, no consumer yet),
                 some dead after the gateway refused them
- reviews.auto   review requests a week out, a few held by a worker (reserved)
- invoices.send  invoices due at month's end, one dead for a bad address
- webhooks.retry a steady trickle due over the next minute (the chart moves)

Usage: tools/demo-data.py [--url http://127.0.0.1:8080] [--token TOKEN]
(the token: http_token; none when the server takes none). Standard library
only; every request has a timeout. Run it again for more of the same (ids
are new each run).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

TIMEOUT = 30


class Api:
    def __init__(self, url: str, token: Optional[str]) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else (b"" if method != "GET" else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raise SystemExit(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}") from e

    def push_many(self, jobs: List[Dict[str, Any]]) -> None:
        self.call("POST", "/v1/jobs", {"jobs": jobs})

    def reserve(self, topic: str, ttr: float) -> Optional[Dict[str, Any]]:
        job: Optional[Dict[str, Any]] = self.call("POST", f"/v1/topics/{quote(topic)}/reserve",
                                                  {"ttr": ttr, "wait": 10})["job"]
        return job

    def bury(self, job: Dict[str, Any], error: str) -> None:
        self.call("POST", f"/v1/topics/{quote(job['topic'])}/jobs/{quote(job['id'])}/bury",
                  {"receipt": job["receipt"], "error": error})


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def fill(api: Api, seed: Optional[int] = None) -> Dict[str, int]:
    """Pushes the set; returns how many jobs per topic."""
    rnd = random.Random(seed)
    run = f"{rnd.randrange(16**4):04x}"
    counts: Dict[str, int] = {}

    def push(topic: str, jobs: List[Dict[str, Any]]) -> None:
        for job in jobs:
            job["topic"] = topic
            job["body"] = json.dumps(job["body"])
        api.push_many(jobs)
        counts[topic] = counts.get(topic, 0) + len(jobs)

    push("orders.close", [
        {"id": f"order:{run}-{n}", "delay": rnd.randint(1800, 6 * 3600), "max_attempts": 5,
         "body": {"order_id": 48_000 + n, "customer": f"cus_{rnd.randrange(10**6):06d}",
                  "total": round(rnd.uniform(9, 450), 2), "currency": "EUR", "reason": "unpaid after 30 min"}}
        for n in range(140)])
    push("sms.remind", [
        {"id": f"sms:{run}-{n}", "delay": rnd.randint(600, 86_400), "max_attempts": 3,
         "body": {"to": f"+4670{rnd.randrange(10**7):07d}", "template": "appointment_reminder",
                  "vars": {"clinic": "Södermalm Dental", "at": "09:30"}}}
        for n in range(60)])
    push("reviews.auto", [
        {"id": f"review:{run}-{n}", "delay": rnd.choice([0, 7 * 86_400]),
         "body": {"order_id": 47_000 + n, "product": rnd.choice(["kettle", "desk lamp", "rain jacket"]),
                  "channel": "email"}}
        for n in range(40)])
    push("invoices.send", [
        {"id": f"invoice:{run}-{n}", "delay": rnd.randint(3 * 86_400, 20 * 86_400),
         "body": {"invoice": f"INV-2026-{n + 1:05d}", "amount": round(rnd.uniform(50, 5000), 2)}}
        for n in range(25)])
    # Due now with nobody consuming yet: ready.
    push("sms.remind", [
        {"id": f"sms:{run}-now-{n}", "delay": 0,
         "body": {"to": f"+4670{rnd.randrange(10**7):07d}", "template": "table_ready"}} for n in range(12)])
    push("invoices.send", [{"id": f"invoice:{run}-bad", "delay": 0,
                            "body": {"invoice": "INV-2026-00099", "email": "accounts@@example"}}])
    # Dead letters, each with why its last attempt failed.
    errors = ["gateway 400: invalid destination number", "gateway timeout after 10 s",
              "template 'table_ready' not approved for sender id"]
    for n in range(7):
        job = api.reserve("sms.remind", 60)
        if job is None:
            break
        api.bury(job, errors[n % len(errors)])
    job = api.reserve("invoices.send", 60)
    if job is not None:
        api.bury(job, "SMTP 553: mailbox name not allowed <accounts@@example>")
    # Held by a worker: reserved for ten minutes.
    for _ in range(4):
        api.reserve("reviews.auto", 600)
    # A trickle over the next minute, for the chart.
    push("webhooks.retry", [
        {"id": f"hook:{run}-{n}", "delay": n * 0.25,
         "body": {"url": "https://partner.example/hooks/order", "event": "order.paid", "try": 1}}
        for n in range(240)])
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--token", default=None)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    counts = fill(Api(args.url, args.token), args.seed)
    for topic, n in sorted(counts.items()):
        print(f"{topic}: {n} jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
