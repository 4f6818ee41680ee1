"""No call destroys a job whose names it cannot decode (issue 20, item 11).

Delayer 1.x and PHP clients write any bytes as ids and topics (a Latin-1
topic, a binary id). The SDK hands such a job out whole, its id and topic as
``str`` with surrogate escapes (``id_bytes`` / ``topic_bytes`` give the
bytes), and takes that ``str`` back on every call: ack, touch, release,
bury, remove, lookups, dead letters. Jobs are written here with raw
commands, byte for byte, in both key layouts, and bodies that are not UTF-8
ride along. A job that cannot be decoded at the head of a ready queue never
blocks the ones behind it.
"""

from __future__ import annotations

from typing import Iterator, List

import pytest
import redis

from delayer import Delayer, Delivery, InvalidArgument, Worker
from delayer.aio import Delayer as AsyncDelayer

from conftest import redis_now, run
from workerkit import Recorder, Running, wait_for

#: Not UTF-8: a Latin-1 "é", a lone continuation byte, a truncated sequence.
BAD_ID = b"order-\xe9-\x80-\xe2\x82"
BAD_TOPIC = b"caf\xe9"
BAD_BODY = b"\xff\xfe body"


def text(raw: bytes) -> str:
    """How the SDK hands out a name that is not UTF-8."""
    return raw.decode("utf-8", "surrogateescape")


class Plant:
    """Writes jobs byte for byte, as a foreign client would, in one layout."""

    def __init__(self, raw: "redis.Redis", layout: str) -> None:
        self.raw = raw
        self.layout = layout
        self.prefix = b"delayer:" if layout == "classic" else b"shop:"

    def client(self, url: str) -> Delayer:
        return Delayer(url, self.prefix.decode(), layout=self.layout)

    def aclient(self, url: str) -> AsyncDelayer:
        return AsyncDelayer(url, self.prefix.decode(), layout=self.layout)

    def key(self, topic: bytes, kind: str) -> bytes:
        """A per-topic name, or the classic layout's shared one."""
        if self.layout == "topic":
            return self.prefix + b"{" + topic + b"}:" + kind.encode()
        shared = {"pool": b"job_pool", "reserved": b"reserved"}
        if kind in shared:
            return self.prefix + shared[kind]
        return self.prefix + {"ready": b"ready_queue:", "dead": b"dead:"}[kind] + topic

    def bucket(self, topic: bytes, job_id: bytes) -> bytes:
        if self.layout == "topic":
            return self.key(topic, "job:") + job_id
        return self.prefix + b"job_bucket:" + job_id

    def ready(self, topic: bytes, job_id: bytes, body: bytes = BAD_BODY) -> None:
        """A job due now, in its topic's ready queue."""
        self.raw.hset(self.bucket(topic, job_id), mapping={b"topic": topic, b"body": body})
        self.raw.lpush(self.key(topic, "ready"), job_id)

    def waiting(self, topic: bytes, job_id: bytes, delay: int = 600) -> None:
        """A job due in ``delay`` seconds, in the pool."""
        self.raw.hset(self.bucket(topic, job_id), mapping={b"topic": topic, b"body": BAD_BODY})
        self.raw.zadd(self.key(topic, "pool"), {job_id: int(redis_now(self.raw)) + delay})

    def move(self, topic: bytes, job_id: bytes) -> None:
        """The server's part for one waiting job: from the pool to its ready queue."""
        assert self.raw.zrem(self.key(topic, "pool"), job_id) == 1
        self.raw.lpush(self.key(topic, "ready"), job_id)

    def gone(self, topic: bytes, job_id: bytes) -> bool:
        """Nothing of the job is left: no bucket, not ready, reserved, waiting or dead."""
        r = self.raw
        return (
            r.exists(self.bucket(topic, job_id)) == 0
            and job_id not in r.lrange(self.key(topic, "ready"), 0, -1)
            and r.zscore(self.key(topic, "reserved"), job_id) is None
            and r.zscore(self.key(topic, "pool"), job_id) is None
            and job_id not in r.lrange(self.key(topic, "dead"), 0, -1)
        )


@pytest.fixture(params=["classic", "topic"])
def plant(request: pytest.FixtureRequest, raw: "redis.Redis") -> Plant:
    return Plant(raw, request.param)


@pytest.fixture
def d(plant: Plant, url: str) -> Iterator[Delayer]:
    with plant.client(url) as client:
        yield client


@pytest.mark.parametrize("blocking", [False, True])
def test_pop_hands_out_a_job_it_cannot_decode_and_the_next_one(d: Delayer, plant: Plant, blocking: bool) -> None:
    plant.ready(b"t", BAD_ID)
    plant.ready(b"t", b"good", b"fine")
    take = (lambda: d.bpop("t", 5)) if blocking else (lambda: d.pop("t"))
    job = take()
    assert job is not None
    assert (job.id_bytes, job.topic_bytes, job.body) == (BAD_ID, b"t", BAD_BODY)
    assert job.id == text(BAD_ID)
    assert plant.gone(b"t", BAD_ID)
    after = take()
    assert after is not None and (after.id, after.body) == ("good", b"fine")


def test_a_topic_that_is_not_utf8_is_named_by_what_stats_say(d: Delayer, plant: Plant) -> None:
    plant.ready(BAD_TOPIC, BAD_ID)
    plant.raw.sadd(plant.prefix + b"topics", BAD_TOPIC)  # as a move (classic) or a push (per topic) records it
    [stats] = [t for t in d.stats().topics if t.topic_bytes == BAD_TOPIC]
    assert stats.ready == 1
    job = d.pop(stats.topic)
    assert job is not None and (job.id_bytes, job.topic_bytes) == (BAD_ID, BAD_TOPIC)
    assert job.topic == stats.topic == text(BAD_TOPIC)


def test_a_reserved_job_is_touched_released_buried_requeued_and_acked(d: Delayer, plant: Plant) -> None:
    plant.ready(BAD_TOPIC, BAD_ID)
    topic = text(BAD_TOPIC)
    job = d.reserve(topic, 30)
    assert job is not None and (job.id_bytes, job.topic_bytes, job.body) == (BAD_ID, BAD_TOPIC, BAD_BODY)
    assert d.touch(job, 60) is not None
    assert d.job(topic, job.id).state == "reserved"
    assert [x.id_bytes for x in d.list_reserved(topic).items] == [BAD_ID]
    assert d.release(job, 0, error="boom")
    plant.move(BAD_TOPIC, BAD_ID)  # due again now
    again = d.breserve(topic, 30, 5)
    assert again is not None and again.id_bytes == BAD_ID and again.attempts == 2
    assert d.bury(again, error="for good")
    [dead] = d.dead_letters(topic)
    assert (dead.id_bytes, dead.topic_bytes, dead.body, dead.reason) == (BAD_ID, BAD_TOPIC, BAD_BODY, "buried")
    info = d.job(topic, dead.id)
    assert (info.state, info.topic, info.last_error) == ("dead", topic, "for good")
    assert d.requeue_dead(topic, [dead.id]) == 1
    plant.move(BAD_TOPIC, BAD_ID)  # requeued due now
    third = d.reserve(topic, 30)
    assert third is not None and third.id_bytes == BAD_ID
    assert d.ack(third)
    assert plant.gone(BAD_TOPIC, BAD_ID)


def test_a_dead_letter_is_purged_by_its_id(d: Delayer, plant: Plant) -> None:
    plant.ready(b"t", BAD_ID)
    job = d.reserve("t", 30)
    assert job is not None and d.bury(job)
    assert d.purge_dead("t", [job.id]) == 1
    assert plant.gone(b"t", BAD_ID)


def test_reserve_many_hands_out_and_acks_jobs_it_cannot_decode(d: Delayer, plant: Plant) -> None:
    ids = [BAD_ID + bytes([n]) for n in range(0x80, 0x85)] + [b"good"]
    for job_id in ids:
        plant.ready(b"t", job_id)
    _, jobs = d.reserve_many("t", 30, 10)
    assert sorted(j.id_bytes for j in jobs) == sorted(ids)
    acked, more = d.reserve_many("t", 30, 10, jobs)
    assert acked == [True] * len(ids) and more == []
    assert all(plant.gone(b"t", i) for i in ids)
    # By id and receipt, as a worker that kept only those would.
    plant.ready(b"t", BAD_ID)
    _, [job] = d.reserve_many("t", 30, 1)
    acked, _ = d.reserve_many("t", 30, 0, [(job.id, job.receipt)])
    assert acked == [True] and plant.gone(b"t", BAD_ID)


def test_lookups_and_listings_name_the_job_that_remove_takes(d: Delayer, plant: Plant) -> None:
    plant.waiting(b"t", BAD_ID)
    plant.ready(b"t", BAD_ID + b"-ready")
    [listed] = d.list_scheduled("t").items
    assert listed.id_bytes == BAD_ID
    assert [d.list_ready("t").items[0].encode("utf-8", "surrogateescape")] == [BAD_ID + b"-ready"]
    info = d.job("t", listed.id)
    assert (info.state, info.id, info.body_size) == ("scheduled", listed.id, len(BAD_BODY))
    assert d.reschedule(listed.id, 900, topic="t") is not None
    assert d.remove(listed.id, topic="t")
    assert plant.gone(b"t", BAD_ID)


def test_the_asyncio_client_hands_out_and_acks_them(plant: Plant, url: str) -> None:
    plant.ready(b"t", BAD_ID)
    plant.ready(b"t", BAD_ID + b"2")

    async def body() -> None:
        async with plant.aclient(url) as d:
            popped = await d.bpop("t", 5)
            assert popped is not None and popped.id_bytes == BAD_ID
            job = await d.breserve("t", 30, 5)
            assert job is not None and job.id_bytes == BAD_ID + b"2"
            assert await d.ack(job)

    run(body)
    assert plant.gone(b"t", BAD_ID) and plant.gone(b"t", BAD_ID + b"2")


def test_a_worker_runs_and_acks_them(d: Delayer, plant: Plant) -> None:
    for n in range(3):
        plant.ready(BAD_TOPIC, BAD_ID + bytes([0x80 + n]))
    seen: List[bytes] = []
    hooks = Recorder()
    w = Worker(d, concurrency=2, hooks=hooks)
    w.handle(text(BAD_TOPIC), lambda job: seen.append(job.id_bytes))
    running = Running(w)
    wait_for("every ack", lambda: len(hooks.names("acked")) == 3)
    running.stop()
    assert sorted(seen) == sorted(BAD_ID + bytes([0x80 + n]) for n in range(3))
    assert all(plant.gone(BAD_TOPIC, BAD_ID + bytes([0x80 + n])) for n in range(3))


def test_a_job_the_asyncio_worker_cannot_decode_is_released_on_failure(plant: Plant, url: str) -> None:
    from delayer.aio import Worker as AsyncWorker

    plant.ready(b"t", BAD_ID)

    async def body() -> None:
        async with plant.aclient(url) as d:
            w = AsyncWorker(d, concurrency=1)
            failed: List[Delivery] = []

            async def fail(job: Delivery) -> None:
                failed.append(job)
                w.stop()
                raise ValueError("no")

            w.handle("t", fail)
            await w.run(signals=False)
            assert [j.id_bytes for j in failed] == [BAD_ID]
            info = await d.job("t", failed[0].id)
            assert (info.state, info.last_error) == ("scheduled", "ValueError: no")

    run(body)


def test_only_names_as_the_sdk_hands_them_out_are_taken(d: Delayer) -> None:
    for bad in ["\ud800", "a\udc7f", "\udcc3\udca9"]:  # not an escaped byte; "é" spelt as two escapes
        with pytest.raises(InvalidArgument, match="not valid UTF-8"):
            d.push("t", bad, 1)
        with pytest.raises(InvalidArgument, match="not valid UTF-8"):
            d.pop(bad)
    assert d.push("t", text(BAD_ID), 60) > 0
