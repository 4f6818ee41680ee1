"""The API on a bad day for Redis, with a real redis-server of its own
(outage.rs): Redis stopped (SIGSTOP) answers nothing, and every request gets
a 503 redis_timeout within http_redis_timeout (a blocking pop: its wait plus
that) while /v1/health still answers; Redis full under noeviction refuses
writes, which get 503 redis_out_of_memory while reads work. Each trouble is
logged once when it starts and once when it is over. And blocking pops are
bounded (http_max_waiting): past the bound, 503 with Retry-After before any
Redis connection is opened."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis

import harness
from conftest import HttpServer, request

REDIS_TIMEOUT = 1
MAX_WAITING = 5
#: Time past a bound for an answer to arrive (a loaded CI machine).
SLACK = 3.0


@pytest.fixture(scope="module")
def own_redis(workdir: Path) -> Iterator[harness.RedisServer]:
    r = harness.RedisServer(workdir / "trouble")
    yield r
    if r.proc is not None:
        os.kill(r.proc.pid, signal.SIGCONT)
    r.stop()


@pytest.fixture(scope="module")
def troubled(workdir: Path, own_redis: harness.RedisServer) -> Iterator[HttpServer]:
    extra = f"http_redis_timeout = {REDIS_TIMEOUT}\nhttp_max_waiting = {MAX_WAITING}\n"
    s = HttpServer(workdir, own_redis, prefix="trouble:", name="trouble", extra=extra)
    yield s
    s.stop()


def timed(server: HttpServer, method: str, path: str, body: Any = None) -> Tuple[float, int, Any, Dict[str, str]]:
    started = time.monotonic()
    status, data, headers = request(server.base, method, path, body)
    return time.monotonic() - started, status, data, headers


def lines(server: HttpServer, text: str) -> List[str]:
    return [line for line in server.log_text().splitlines() if text in line]


def test_a_stalled_redis_gets_503_within_the_bound_and_is_logged_once(
    troubled: HttpServer, own_redis: harness.RedisServer
) -> None:
    topic = "stall-" + uuid.uuid4().hex[:6]
    assert request(troubled.base, "POST", f"/v1/topics/{topic}/jobs", {"id": "a", "delay": 0})[0] == 201
    assert own_redis.proc is not None
    calls = [
        ("GET", "/v1/stats", None, REDIS_TIMEOUT),
        ("GET", f"/v1/topics/{topic}/jobs/a", None, REDIS_TIMEOUT),
        ("POST", f"/v1/topics/{topic}/jobs", {"id": "b", "delay": 5}, REDIS_TIMEOUT),
        ("POST", f"/v1/topics/{topic}/pop", None, REDIS_TIMEOUT),
        ("POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 2}, 2 + REDIS_TIMEOUT),
        ("POST", f"/v1/topics/{topic}/pop", {"wait": 2}, 2 + REDIS_TIMEOUT),
    ]
    results: List[Any] = [None] * len(calls)
    os.kill(own_redis.proc.pid, signal.SIGSTOP)
    try:
        def call(i: int) -> None:
            method, path, body, _ = calls[i]
            results[i] = timed(troubled, method, path, body)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        # Health needs no Redis, and answers meanwhile.
        took, status, _, _ = timed(troubled, "GET", "/v1/health")
        assert status == 200 and took < SLACK
        for t in threads:
            t.join(timeout=15)
    finally:
        os.kill(own_redis.proc.pid, signal.SIGCONT)
    for (method, path, _, bound), result in zip(calls, results):
        assert result is not None, f"{method} {path}: no answer"
        took, status, data, headers = result
        assert (status, data["error"]["code"]) == (503, "redis_timeout"), (method, path, status, data)
        assert took < bound + SLACK and headers.get("retry-after") == "1", (method, path, took)
    # Said once, for all six; then once more when Redis answers again.
    assert len(lines(troubled, "http: Redis did not answer")) == 1, harness.tail(troubled.log)

    def over() -> bool:
        request(troubled.base, "GET", "/v1/stats")
        return len(lines(troubled, "no answer from Redis is over after")) == 1

    assert harness.wait_until(over, step=0.5), harness.tail(troubled.log)
    assert request(troubled.base, "GET", f"/v1/topics/{topic}/jobs/a")[0] == 200


def test_a_full_redis_gets_503_out_of_memory_for_writes_and_recovers(
    troubled: HttpServer, own_redis: harness.RedisServer
) -> None:
    topic = "oom-" + uuid.uuid4().hex[:6]
    rds = own_redis.client()
    rds.config_set("maxmemory-policy", "noeviction")
    # 4 MB of other data, then a limit 1 MB below what Redis holds: every
    # write is refused, however Redis's own buffers come and go.
    junk = "junk-" + uuid.uuid4().hex[:6]
    rds.mset({f"{junk}:{n}": b"x" * 100_000 for n in range(40)})
    rds.config_set("maxmemory", int(rds.info("memory")["used_memory"]) - 1024 * 1024)
    try:
        try:
            rds.set(f"{junk}:probe", b"x")
            raise AssertionError("Redis took a write past maxmemory")
        except redis.exceptions.ResponseError as e:  # OutOfMemoryError
            assert "maxmemory" in str(e), e
        jobs = f"/v1/topics/{topic}/jobs"
        for push in ((jobs, {"id": "a", "delay": 1}), ("/v1/jobs", {"jobs": [{"topic": topic, "id": "b", "delay": 1}]})):
            for _ in range(3):
                status, data, headers = request(troubled.base, "POST", *push)
                assert status == 503 and data["error"]["code"] == "redis_out_of_memory", (status, data)
                assert headers.get("retry-after") == "1"
        # Reading still works.
        assert request(troubled.base, "GET", "/v1/stats")[0] == 200
        assert request(troubled.base, "GET", f"{jobs}/a")[1]["state"] == "unknown"
        assert len(lines(troubled, "Redis is out of memory")) == 1, harness.tail(troubled.log)
    finally:
        rds.config_set("maxmemory", 0)
        rds.delete(*[f"{junk}:{n}" for n in range(40)])
    # Memory freed: writes go through again, and the end is said once.

    def over() -> bool:
        assert request(troubled.base, "POST", f"/v1/topics/{topic}/jobs", {"id": "c", "delay": 60})[0] == 201
        return len(lines(troubled, "Redis out of memory is over after")) == 1

    assert harness.wait_until(over, step=0.5), harness.tail(troubled.log)


def test_blocking_pops_are_bounded_and_answer_503_past_the_bound(
    troubled: HttpServer, own_redis: harness.RedisServer
) -> None:
    topic = "wait-" + uuid.uuid4().hex[:6]
    rds = own_redis.client()
    before = len(rds.client_list())
    results: List[Any] = []

    def pop() -> None:
        results.append(timed(troubled, "POST", f"/v1/topics/{topic}/pop", {"wait": 3}))

    threads = [threading.Thread(target=pop) for _ in range(MAX_WAITING + 3)]
    for t in threads:
        t.start()
    # The three past the bound are answered at once, with Retry-After.
    assert harness.wait_until(lambda: len(results) >= 3, deadline=2 + SLACK, step=0.05)
    refused = list(results)
    assert all(r[1] == 503 and r[2]["error"]["code"] == "too_many_waiting" for r in refused), refused
    assert all(r[3].get("retry-after") == "1" for r in refused)
    # The others wait, each on a Redis connection of its own: no more.
    waiting = len(rds.client_list())
    for t in threads:
        t.join(timeout=15)
    assert waiting <= before + MAX_WAITING, (before, waiting)
    answered = [r for r in results if r[1] == 200]
    assert len(answered) == MAX_WAITING and all(r[2] == {"job": None} for r in answered), results
