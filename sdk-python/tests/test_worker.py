"""The thread Worker (issue 14), against a real redis-server with the
server's scripts moving and expiring jobs (workerkit.Server)."""

from __future__ import annotations

import threading
import time
from typing import Iterator, List

import pytest
import redis

from delayer import Backoff, Delayer, Delivery, InvalidArgument, Worker

from conftest import RedisServer, bucket, redis_now
from workerkit import Recorder, Running, Server, push_now, wait_for


@pytest.fixture
def server(url: str) -> Iterator[Server]:
    s = Server(url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def d(url: str) -> Iterator[Delayer]:
    with Delayer(url) as client:
        yield client


def settled(raw: "redis.Redis") -> bool:
    """Nothing waits, is ready or is reserved any more."""
    return (raw.zcard("delayer:job_pool") == 0 and raw.zcard("delayer:reserved") == 0
            and not raw.keys("delayer:ready_queue:*"))


def test_jobs_are_run_with_their_data_and_acked(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    seen: List[tuple] = []
    hooks = Recorder()
    w = Worker(d, concurrency=4, hooks=hooks)
    w.handle("t", lambda job: seen.append((job.id, job.topic, job.text, job.attempts)))
    push_now(d, (f"j{i}" for i in range(50)))
    running = Running(w)
    wait_for("every ack", lambda: len(hooks.names("acked")) == 50)
    wait_for("an empty queue", lambda: settled(raw) and not raw.keys("delayer:job_bucket:*"))
    running.stop()
    assert sorted(seen) == sorted((f"j{i}", "t", f"body-j{i}", 1) for i in range(50))
    assert len(hooks.names("started")) == len(hooks.names("succeeded")) == 50
    assert hooks.names("lost") == [] and hooks.names("failed") == []
    assert hooks.names("stopped") == [("stopped", 0)]


def test_a_failing_handler_releases_the_job_with_its_error(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    hooks = Recorder()
    w = Worker(d, hooks=hooks)

    @w.handler("t")
    def fail(job: Delivery) -> None:
        raise ValueError(f"bad order {job.id}")

    d.push("t", "a", 0, "x", backoff=Backoff.fixed(3600))
    running = Running(w)
    wait_for("the release", lambda: raw.hexists(bucket("a"), "last_error"))
    running.stop()
    assert raw.hget(bucket("a"), "last_error") == b"ValueError: bad order a"
    assert raw.zscore("delayer:job_pool", "a") > redis_now(raw) + 3000  # its backoff, not at once
    assert hooks.names("failed") == [("failed", "a", "ValueError")]
    assert hooks.names("acked") == []


def test_the_last_attempt_goes_to_dead_letters_with_its_error(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    runs: List[int] = []
    w = Worker(d)

    def fail(job: Delivery) -> None:
        runs.append(job.attempts)
        raise KeyError("sku")

    w.handle("t", fail)
    d.push("t", "a", 0, "x", max_attempts=2, backoff=Backoff.fixed(0))
    running = Running(w)
    wait_for("the dead letter", lambda: raw.llen("delayer:dead:t") == 1)
    running.stop()
    assert runs == [1, 2]
    (dead,) = d.dead_letters("t")
    assert dead.id == "a" and dead.reason == "max_attempts"
    assert raw.hget(bucket("a"), "last_error") == b"KeyError: 'sku'"


def test_at_most_once_pops_and_a_failure_loses_the_job(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    seen: List[str] = []
    w = Worker(d, at_most_once=True, concurrency=3)

    def handle(job: Delivery) -> None:
        seen.append(job.id)
        if job.id == "j3":
            raise RuntimeError("lost for good")

    w.handle("t", handle)
    push_now(d, (f"j{i}" for i in range(10)))
    running = Running(w)
    wait_for("every job", lambda: len(seen) == 10)
    running.stop()
    assert sorted(seen) == sorted(f"j{i}" for i in range(10))
    assert not raw.exists("delayer:reserved", "delayer:receipt_seq")  # never reserved
    assert not raw.keys("delayer:job_bucket:*")  # j3 too: popped is gone


def test_a_long_handler_keeps_its_reservation(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    runs: List[int] = []
    w = Worker(d, ttr=4.0)

    def slow(job: Delivery) -> None:
        runs.append(job.attempts)
        time.sleep(10)  # past its ttr twice over: the worker touches it every 2 s

    w.handle("t", slow)
    d.push("t", "a", 0, "x")
    running = Running(w)
    wait_for("the ack", lambda: not raw.exists(bucket("a")))
    running.stop()
    assert runs == [1]  # the server's expiry never took it back


def test_a_handler_may_extend_its_reservation(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    deadlines: List[object] = []
    go = threading.Event()
    w = Worker(d, ttr=5.0)

    def handle(job: Delivery) -> None:
        deadlines.append(job.extend(600))
        go.wait(WITHIN_HANDLER)

    w.handle("t", handle)
    d.push("t", "a", 0, "x")
    running = Running(w)
    try:
        wait_for("the extend", lambda: len(deadlines) == 1)
        score = raw.zscore("delayer:reserved", "a")
        assert score is not None and score / 1000 > redis_now(raw) + 500
        assert isinstance(deadlines[0], float) and abs(deadlines[0] - score / 1000) < 0.01
    finally:
        go.set()
    wait_for("the ack", lambda: not raw.exists(bucket("a")))
    running.stop()


WITHIN_HANDLER = 60.0


def test_a_stop_lets_running_handlers_finish(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    go = threading.Event()
    started = threading.Event()
    hooks = Recorder()
    w = Worker(d, grace=60, hooks=hooks)

    def handle(job: Delivery) -> None:
        started.set()
        go.wait(WITHIN_HANDLER)

    w.handle("t", handle)
    d.push("t", "a", 0, "x")
    running = Running(w)
    wait_for("the handler", started.is_set)
    w.stop()
    wait_for("the stop", lambda: hooks.names("stopping") != [])
    assert running.thread.is_alive()  # waiting for the handler
    go.set()
    running.stop()
    assert not raw.exists(bucket("a"))  # acked on the way out
    assert hooks.names("stopped") == [("stopped", 0)]


def test_a_stop_releases_what_outlasts_the_grace(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    go = threading.Event()
    started = threading.Event()
    hooks = Recorder()
    w = Worker(d, grace=0.5, hooks=hooks)

    def handle(job: Delivery) -> None:
        started.set()
        go.wait(WITHIN_HANDLER)

    w.handle("t", handle)
    d.push("t", "a", 0, "x", backoff=Backoff.fixed(3600))
    running = Running(w)
    wait_for("the handler", started.is_set)
    server.close()  # keep the released job in view (no move to ready)
    running.stop()
    assert hooks.names("stopped") == [("stopped", 1)]
    assert raw.zscore("delayer:job_pool", "a") is not None  # given back, due at once
    assert raw.zscore("delayer:job_pool", "a") <= redis_now(raw) + 1
    assert raw.hget(bucket("a"), "last_error", ).startswith(b"WorkerStopped: ")
    go.set()  # the handler ends late: its ack finds the reservation gone
    wait_for("the late ack", lambda: hooks.names("lost") == [("lost", "a", "ack")])
    assert raw.zscore("delayer:job_pool", "a") is not None


def test_an_ack_is_sent_while_the_worker_waits(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    w = Worker(d, concurrency=8)
    w.handle("t", lambda job: None)
    running = Running(w)
    wait_for("a wait for jobs", lambda: int(raw.info("clients")["blocked_clients"]) >= 1)
    d.push("t", "a", 0, "x")
    wait_for("the ack", lambda: not raw.exists(bucket("a")))
    running.stop()


def test_topics_are_served_in_turn(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    order: List[str] = []
    w = Worker(d, concurrency=2)
    w.handle("a", lambda job: order.append(job.topic))
    w.handle("b", lambda job: order.append(job.topic))
    push_now(d, (f"a{i}" for i in range(100)), topic="a")
    push_now(d, (f"b{i}" for i in range(100)), topic="b")
    wait_for("ready jobs", lambda: raw.llen("delayer:ready_queue:a") + raw.llen("delayer:ready_queue:b") == 200)
    running = Running(w)
    wait_for("every job", lambda: len(order) == 200)
    running.stop()
    first = order[:40]
    assert first.count("a") >= 10 and first.count("b") >= 10, first


def test_the_worker_outlives_a_redis_restart(own_server: RedisServer) -> None:
    server = Server(own_server.url)
    hooks = Recorder()
    seen: List[str] = []
    try:
        with Delayer(own_server.url) as d:
            w = Worker(d, hooks=hooks)
            w.handle("t", lambda job: seen.append(job.id))
            running = Running(w)
            d.push("t", "before", 0, "x")
            wait_for("the first job", lambda: seen == ["before"])
            own_server.halt()
            wait_for("the lost connection", lambda: hooks.names("connection_lost") != [])
            own_server.start_again()
            d.push("t", "after", 0, "x")
            wait_for("the job pushed after the restart", lambda: seen == ["before", "after"])
            running.stop()
    finally:
        server.close()
    pauses = [e[2] for e in hooks.names("connection_lost")]
    assert pauses[0] == 0.1 and all(p <= 5.0 for p in pauses)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"ttr": 0}, "ttr"),
        ({"grace": -1}, "grace"),
        ({"at_most_once": "yes"}, "at_most_once"),
    ],
)
def test_bad_settings_are_refused(d: Delayer, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Worker(d, **kwargs)


def test_bad_registrations_are_refused(d: Delayer) -> None:
    w = Worker(d)
    w.handle("t", lambda job: None)
    with pytest.raises(InvalidArgument, match="has a handler already"):
        w.handle("t", lambda job: None)
    with pytest.raises(InvalidArgument, match="topic"):
        w.handle("", lambda job: None)
    with pytest.raises(TypeError, match="callable"):
        w.handle("u", "not a function")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="no handler"):
        Worker(d).run(signals=False)


def test_a_concurrency_past_one_calls_limit_fetches_in_several_calls(
    d: Delayer, raw: "redis.Redis", server: Server
) -> None:
    # reserve.lua takes at most 1000 jobs per call: a worker with more free
    # slots than that asks in several calls (it once asked for all at once,
    # was refused, and retried for ever).
    hooks = Recorder()
    w = Worker(d, concurrency=1100, hooks=hooks)
    w.handle("t", lambda job: None)
    push_now(d, (f"j{i}" for i in range(1050)))
    wait_for("ready jobs", lambda: raw.llen("delayer:ready_queue:t") == 1050)
    running = Running(w)
    wait_for("every ack", lambda: len(hooks.names("acked")) == 1050)
    running.stop()
    assert hooks.names("connection_lost") == []


def test_a_topic_may_have_its_own_ttr(d: Delayer, raw: "redis.Redis", server: Server) -> None:
    deadlines: List[float] = []
    go = threading.Event()
    w = Worker(d, ttr=30)

    def record(job: Delivery) -> None:
        score = raw.zscore("delayer:reserved", job.id)
        assert score is not None
        deadlines.append(score / 1000 - redis_now(raw))
        go.wait(WITHIN_HANDLER)

    w.handle("short", record, ttr=5)
    w.handle("long", record)
    d.push("short", "s", 0, "x")
    d.push("long", "l", 0, "x")
    running = Running(w)
    try:
        wait_for("both jobs", lambda: len(deadlines) == 2)
    finally:
        go.set()
    running.stop()
    short, long = sorted(deadlines)
    assert short <= 5 and long > 25


def test_many_handlers_ending_at_once_share_a_few_connections(
    url: str, raw: "redis.Redis", server: Server
) -> None:
    # 50 handlers fail (and 50 succeed) at the same moment through a client
    # whose pool holds 24 connections: the releases and acks of the runners
    # share a few of them. Each runner once made its own call, and redis-py
    # refused the 25th with "Too many connections".
    pool = redis.ConnectionPool.from_url(url, max_connections=24)
    client = redis.Redis(connection_pool=pool)
    hooks = Recorder()
    together = threading.Barrier(100)
    with Delayer(client=client) as d:
        w = Worker(d, concurrency=100, hooks=hooks)

        def handle(job: Delivery) -> None:
            together.wait(WITHIN_HANDLER)
            if int(job.id[1:]) % 2:
                raise RuntimeError("odd")

        w.handle("t", handle)
        push_now(d, (f"j{i}" for i in range(100)), backoff=Backoff.fixed(3600))
        wait_for("ready jobs", lambda: raw.llen("delayer:ready_queue:t") == 100)
        running = Running(w)
        wait_for("every end", lambda: len(hooks.names("acked")) + len(hooks.names("failed")) == 100)
        wait_for("every release", lambda: raw.zcard("delayer:job_pool") == 50)
        running.stop()
    client.close()
    assert hooks.names("connection_lost") == [] and hooks.names("lost") == []
    assert all(raw.hget(bucket(f"j{i}"), "last_error") == b"RuntimeError: odd" for i in range(1, 100, 2))
