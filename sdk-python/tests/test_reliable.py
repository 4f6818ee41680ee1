"""At least once: reserve / ack / release / bury, dead letters and reschedule
(docs/PROTOCOL.md, "Reserve and ack"), against a real redis-server.

There is no Delayer server here: move.lua (the server's own script, run by
``move_until``) makes pushed jobs ready, and reservation expiry (the server's
release.lua "expired" mode) is left to the conformance suite.
"""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional

import pytest
import redis

from delayer import Backoff, DeadLetter, Delayer, InvalidArgument, Job, ProtocolError, ReservedMessage

from conftest import bucket, move_until, redis_now, reserved_deadline

POOL = "delayer:job_pool"
RESERVED = "delayer:reserved"



def ready(topic: str) -> str:
    return f"delayer:ready_queue:{topic}"


def dead(topic: str) -> str:
    return f"delayer:dead:{topic}"


def make_ready(d: Delayer, raw: "redis.Redis", topic: str, job_id: str, body: bytes = b"", **kw: Any) -> None:
    """Push a job due now and let the server's move.lua put it in its ready queue."""
    d.push(topic, job_id, 0, body, **kw)
    move_until(raw, 1)


def make_due_again(d: Delayer, raw: "redis.Redis", job_id: str) -> None:
    """A job between retries (in the pool) made due now and moved to its ready queue."""
    assert d.reschedule(job_id, 0) is not None
    move_until(raw, 1)


def reserve_one(d: Delayer, topic: str, ttr: float = 30) -> ReservedMessage:
    job = d.reserve(topic, ttr)
    assert job is not None
    return job


def wait_for_blocked_client(raw: "redis.Redis", within: float = 5.0) -> None:
    """Poll until some client blocks (a BLMOVE in breserve), with a deadline."""
    deadline = time.monotonic() + within
    while int(raw.info("clients")["blocked_clients"]) < 1:
        if time.monotonic() > deadline:
            raise AssertionError("no client blocked within the deadline")
        time.sleep(0.005)


# --------------------------------------------------------------------------
# reserve


def test_reserve_hands_out_attempt_1_and_holds_the_job(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "mail", "order-1", b"hello", ready_max_lifetime=100)
        assert raw.pttl(bucket("order-1")) > 0
        before = redis_now(raw)
        job = d.reserve("mail", 30)
        after = redis_now(raw)
        assert job is not None
        assert (job.id, job.topic, job.body, job.attempts, job.max_attempts) == ("order-1", "mail", b"hello", 1, 25)
        assert job.receipt != "" and job.receipt.isdigit()
        assert before + 30 - 0.002 <= job.deadline <= after + 30 + 0.002
        assert not job.is_last_attempt
        # out of the ready queue, into the reserved set scored by its deadline
        assert raw.llen(ready("mail")) == 0
        score = reserved_deadline(raw, "order-1")
        assert score is not None and abs(score - job.deadline) < 0.0005
        # kept until acked: no TTL; the retry defaults are not written (release.lua applies them)
        assert raw.pttl(bucket("order-1")) == -1
        assert raw.hgetall(bucket("order-1")) == {
            b"topic": b"mail",
            b"body": b"hello",
            b"attempts": b"1",
            b"receipt": job.receipt.encode(),
        }
        # invisible to every other consumer
        assert d.reserve("mail", 30) is None
        assert d.pop("mail") is None


def test_reserve_on_an_empty_topic_is_none_and_skips_gone_ids(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        assert d.reserve("nothing", 5) is None
        raw.lpush(ready("t"), "ghost")
        make_ready(d, raw, "t", "live", b"x")  # LPUSHed after the ghost: the ghost comes out first
        job = d.reserve("t", 5)
        assert job is not None and job.id == "live"
        assert raw.llen(ready("t")) == 0
        assert raw.zrange(RESERVED, 0, -1) == [b"live"]


def test_push_with_retry_settings_writes_them_and_reserve_writes_no_defaults(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "a", 0, b"", max_attempts=3, backoff=Backoff.fixed(2.5))
        d.push("t", "b", 0, b"", max_attempts=0)
        d.push("t", "c", 0, b"", backoff=Backoff.exponential(0.25, 8))
        assert raw.hgetall(bucket("a")) == {
            b"topic": b"t",
            b"body": b"",
            b"max_attempts": b"3",
            b"backoff": b"fixed",
            b"backoff_ms": b"2500",
            b"backoff_max_ms": b"2500",
        }
        assert raw.hgetall(bucket("b")) == {b"topic": b"t", b"body": b"", b"max_attempts": b"0"}
        assert raw.hgetall(bucket("c")) == {
            b"topic": b"t",
            b"body": b"",
            b"backoff": b"exponential",
            b"backoff_ms": b"250",
            b"backoff_max_ms": b"8000",
        }
        move_until(raw, 3)
        got = {j.id: j for j in (reserve_one(d, "t") for _ in range(3))}
    assert (got["a"].max_attempts, got["b"].max_attempts, got["c"].max_attempts) == (3, 0, 25)
    assert raw.hmget(bucket("a"), "backoff", "backoff_ms") == [b"fixed", b"2500"]
    # The defaults (25, exponential from 1 s up to 1 h) are release.lua's to apply, never written.
    assert raw.hmget(bucket("b"), "backoff", "backoff_ms", "backoff_max_ms") == [None, None, None]
    assert raw.hmget(bucket("c"), "max_attempts", "backoff_ms", "backoff_max_ms") == [None, b"250", b"8000"]


def test_push_many_carries_retry_settings_per_job(url: str, raw: "redis.Redis") -> None:
    jobs = [Job("t", f"j{i}", 0, b"", max_attempts=i, backoff=Backoff.fixed(i)) for i in range(150)]
    jobs.append(Job("t", "plain", 0, b"p"))
    with Delayer(url) as d:
        assert len(d.push_many(jobs)) == 151
    assert raw.hgetall(bucket("j149")) == {
        b"topic": b"t",
        b"body": b"",
        b"max_attempts": b"149",
        b"backoff": b"fixed",
        b"backoff_ms": b"149000",
        b"backoff_max_ms": b"149000",
    }
    assert raw.hget(bucket("j0"), "max_attempts") == b"0"
    assert raw.hgetall(bucket("plain")) == {b"topic": b"t", b"body": b"p"}
    assert raw.zcard(POOL) == 151


# --------------------------------------------------------------------------
# ack


def test_ack_with_the_right_receipt_deletes_the_job(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"x")
        job = reserve_one(d, "t")
        assert d.ack(job) is True
        assert raw.exists(bucket("j")) == 0
        assert raw.zcard(RESERVED) == 0
        assert d.ack(job) is False  # a second ack: nothing held any more
        assert d.ack("j") is False
    assert set(raw.keys("*")) == {b"delayer:receipt_seq", b"delayer:topics", b"delayer:outcomes"}


def test_ack_with_a_wrong_receipt_changes_nothing(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"x")
        job = reserve_one(d, "t")
        fake = ReservedMessage(job.id, job.topic, job.body, job.attempts, job.max_attempts, job.receipt + "0", 0.0)
        assert d.ack(fake) is False
        assert d.ack("j", "not-the-receipt") is False
        assert raw.zscore(RESERVED, "j") is not None
        assert raw.hget(bucket("j"), "receipt") == job.receipt.encode()
        assert d.ack("j", job.receipt) is True  # an id with the right receipt
        assert raw.exists(bucket("j")) == 0


def test_ack_by_id_alone_acks_the_current_reservation(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        reserve_one(d, "t")
        assert d.ack("j") is True
        assert raw.exists(bucket("j")) == 0 and raw.zcard(RESERVED) == 0


def test_an_old_reservation_cannot_end_the_next_one(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        first = reserve_one(d, "t")
        assert d.release(first, 0) is True
        move_until(raw, 1)
        second = reserve_one(d, "t")
        assert second.attempts == 2 and second.receipt != first.receipt
        assert d.ack(first) is False
        assert d.release(first) is False
        assert d.bury(first) is False
        assert d.touch(first, 600) is None
        assert d.touch("j", 600, receipt=first.receipt) is None
        assert reserved_deadline(raw, "j") == pytest.approx(second.deadline, abs=0.002)
        assert d.ack(second) is True


def test_a_push_under_a_reserved_id_replaces_the_job(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"old")
        job = reserve_one(d, "t")
        d.push("t", "j", 60, b"new")
        assert d.ack(job) is False
        assert d.release(job) is False
        assert raw.hgetall(bucket("j")) == {b"topic": b"t", b"body": b"new"}


# --------------------------------------------------------------------------
# touch


def test_touch_sets_a_new_deadline_for_the_holder_only(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "a")
        job = reserve_one(d, "t", 5)

        before = redis_now(raw)
        deadline = d.touch(job, 600)
        assert deadline is not None
        stored = reserved_deadline(raw, "a")
        assert stored is not None and abs(deadline - stored) < 0.002
        assert abs(stored - (before + 600)) < 0.5  # now + ttr
        # set, not added to: a shorter ttr brings the deadline in
        shorter = d.touch("a", 10)
        assert shorter is not None and shorter < deadline
        assert raw.hget(bucket("a"), "attempts") == b"1"  # still the first attempt

        assert d.touch("a", 1, receipt="other") is None
        assert d.touch("unknown", 1) is None
        assert d.ack(job) is True
        assert d.touch(job, 1) is None
        assert raw.zcard(RESERVED) == 0  # a late touch adds nothing


# --------------------------------------------------------------------------
# release and bury


def test_release_with_a_delay_puts_it_back_in_the_pool(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"x")
        job = reserve_one(d, "t")
        before = redis_now(raw)
        assert d.release(job, 5) is True
        after = redis_now(raw)
        score = raw.zscore(POOL, "j")
        assert score is not None and before + 5 - 0.002 <= score <= after + 5 + 0.002
        assert raw.zcard(RESERVED) == 0
        assert raw.hget(bucket("j"), "receipt") is None
        assert raw.hget(bucket("j"), "attempts") == b"1"
        assert d.release(job, 5) is False  # ended already
        assert d.ack(job) is False


def test_release_by_id_with_a_receipt(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        job = reserve_one(d, "t")
        assert d.release("j", 1.5, receipt="nope") is False
        assert d.release("j", 1.5, receipt=job.receipt) is True
        assert raw.zscore(POOL, "j") is not None


def test_release_without_a_delay_uses_a_fixed_backoff(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", backoff=Backoff.fixed(7))
        for attempt in (1, 2, 3):
            job = reserve_one(d, "t")
            assert job.attempts == attempt
            now = redis_now(raw)
            assert d.release(job) is True
            score = raw.zscore(POOL, "j")
            assert score is not None and now + 7 - 0.002 <= score <= now + 7 + 0.5, attempt
            make_due_again(d, raw, "j")


def test_release_without_a_delay_uses_an_exponential_backoff(url: str, raw: "redis.Redis") -> None:
    waits = {1: 2.0, 2: 4.0, 3: 5.0, 4: 5.0}  # 2 s doubling, capped at 5 s
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", backoff=Backoff.exponential(2, 5))
        for attempt, wait in waits.items():
            job = reserve_one(d, "t")
            assert job.attempts == attempt
            now = redis_now(raw)
            assert d.release(job) is True
            score = raw.zscore(POOL, "j")
            assert score is not None and now + wait - 0.002 <= score <= now + wait + 0.5, attempt
            make_due_again(d, raw, "j")


def test_release_uses_the_default_backoff(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        job = reserve_one(d, "t")
        now = redis_now(raw)
        assert d.release(job) is True
    score = raw.zscore(POOL, "j")
    assert score is not None and now + 1 - 0.002 <= score <= now + 1.5  # 1 s on the first failure


def test_release_past_max_attempts_goes_to_dead_letters(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"body", max_attempts=2, backoff=Backoff.fixed(60))
        first = reserve_one(d, "t")
        assert not first.is_last_attempt
        assert d.release(first) is True
        assert raw.zscore(POOL, "j") is not None
        make_due_again(d, raw, "j")
        second = reserve_one(d, "t")
        assert second.attempts == 2 and second.is_last_attempt
        now = redis_now(raw)
        assert d.release(second, 1, error="smtp timeout") is True  # even with a delay: out of attempts
        assert raw.zscore(POOL, "j") is None
        assert raw.zcard(RESERVED) == 0
        assert raw.lrange(dead("t"), 0, -1) == [b"j"]
        assert raw.hget(bucket("j"), "dead_reason") == b"max_attempts"
        assert raw.hget(bucket("j"), "receipt") is None
        assert abs(float(raw.hget(bucket("j"), "dead_at") or 0) - now) < 1
        assert raw.pttl(bucket("j")) == -1  # dead letters are kept
        letters = d.dead_letters("t")
    assert len(letters) == 1
    letter = letters[0]
    assert (letter.id, letter.topic, letter.body, letter.attempts, letter.reason) == (
        "j",
        "t",
        b"body",
        2,
        "max_attempts",
    )
    assert abs(letter.dead_at - now) < 1
    assert letter.last_error == "smtp timeout"


def test_bury_sends_the_job_to_dead_letters_whatever_its_attempts(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"x", max_attempts=0)
        job = reserve_one(d, "t")
        assert job.max_attempts == 0 and not job.is_last_attempt
        assert d.bury(job) is True
        assert d.bury(job) is False
        assert raw.lrange(dead("t"), 0, -1) == [b"j"]
        assert raw.hget(bucket("j"), "dead_reason") == b"buried"
        assert raw.zcard(RESERVED) == 0 and raw.zscore(POOL, "j") is None
        assert [(x.reason, x.last_error) for x in d.dead_letters("t")] == [("buried", None)]


def test_bury_by_id_and_receipt(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        job = reserve_one(d, "t")
        assert d.bury("j", "wrong") is False
        assert d.bury("j", job.receipt) is True
        assert raw.lrange(dead("t"), 0, -1) == [b"j"]


# --------------------------------------------------------------------------
# dead letters


def kill(d: Delayer, raw: "redis.Redis", topic: str, ids: List[str]) -> None:
    """Reserve and bury each of ``ids`` (pushed now): they end up dead, in this order."""
    for job_id in ids:
        make_ready(d, raw, topic, job_id, job_id.encode())
        assert d.bury(reserve_one(d, topic)) is True


def test_dead_letters_lists_newest_first_with_paging(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        kill(d, raw, "t", ["a", "b", "c", "d"])
        kill(d, raw, "other", ["x"])
        assert [x.id for x in d.dead_letters("t")] == ["d", "c", "b", "a"]
        assert [x.id for x in d.dead_letters("t", 1, 2)] == ["c", "b"]
        assert [x.id for x in d.dead_letters("t", 3, 1000)] == ["a"]
        assert d.dead_letters("t", 4) == []
        assert d.dead_letters("none") == []
        # a removed job's entry is stale: skipped
        assert d.remove("c") is True
        listed = d.dead_letters("t")
        assert [x.id for x in listed] == ["d", "b", "a"]
        assert all(isinstance(x, DeadLetter) and x.body == x.id.encode() and x.attempts == 1 for x in listed)
        assert [x.id for x in d.dead_letters("other")] == ["x"]


def test_requeue_dead_all_resets_attempts_and_schedules_now(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        kill(d, raw, "t", ["a", "b", "c"])
        d.remove("b")  # stale: dropped, not counted
        now = redis_now(raw)
        assert d.requeue_dead("t") == 2
        assert raw.exists(dead("t")) == 0
        for job_id in ("a", "c"):
            score = raw.zscore(POOL, job_id)
            assert score is not None and abs(score - now) < 1
            assert raw.hget(bucket(job_id), "attempts") == b"0"
            assert raw.hmget(bucket(job_id), "dead_reason", "dead_at") == [None, None]
        assert raw.zscore(POOL, "b") is None
        assert d.requeue_dead("t") == 0
        # back in circulation: the next reservation is attempt 1 again
        move_until(raw, 2)
        assert sorted((j.id, j.attempts) for j in (reserve_one(d, "t"), reserve_one(d, "t"))) == [("a", 1), ("c", 1)]


def test_requeue_dead_by_id(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        kill(d, raw, "t", ["a", "b", "c"])
        raw.config_resetstat()
        assert d.requeue_dead("t", []) == 0
        assert "cmdstat_evalsha" not in raw.info("commandstats")  # nothing sent
        assert d.requeue_dead("t", ["b", "unknown"]) == 1
        assert raw.zscore(POOL, "b") is not None and raw.zscore(POOL, "a") is None
        assert raw.lrange(dead("t"), 0, -1) == [b"c", b"a"]
        assert d.requeue_dead("t", iter(["b"])) == 0  # not dead any more
        assert [x.id for x in d.dead_letters("t")] == ["c", "a"]


def test_purge_dead_deletes_the_jobs(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        kill(d, raw, "t", ["a", "b", "c"])
        assert d.purge_dead("t", ["a"]) == 1
        assert raw.exists(bucket("a")) == 0 and raw.exists(bucket("b")) == 1
        assert d.purge_dead("t") == 2
        assert raw.exists(bucket("b"), bucket("c"), dead("t")) == 0
        assert d.purge_dead("t") == 0
    assert set(raw.keys("*")) == {b"delayer:receipt_seq", b"delayer:topics", b"delayer:outcomes"}


def fill_dead(raw: "redis.Redis", topic: str, count: int) -> List[str]:
    """``count`` dead letters written directly as release.lua leaves them (faster than burying)."""
    ids = [f"d{n}" for n in range(count)]
    with raw.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hset(
                bucket(job_id),
                mapping={"topic": topic, "body": job_id, "attempts": 3, "dead_reason": "buried", "dead_at": "1.000"},
            )
            pipe.lpush(dead(topic), job_id)
        pipe.execute()
    return ids


def test_requeue_and_purge_all_go_1000_per_call(url: str, raw: "redis.Redis") -> None:
    ids = fill_dead(raw, "t", 2500)
    with Delayer(url) as d:
        raw.config_resetstat()
        assert d.requeue_dead("t", ids[:1500]) == 1500
        assert int(raw.info("commandstats")["cmdstat_evalsha"]["calls"]) == 2
        assert raw.llen(dead("t")) == 1000
        assert raw.zcard(POOL) == 1500
        fill_dead(raw, "u", 2000)  # exactly twice 1000: a third call finds the list empty
        raw.config_resetstat()
        assert d.purge_dead("u") == 2000
        assert int(raw.info("commandstats")["cmdstat_evalsha"]["calls"]) == 3
        assert raw.exists(dead("u"), bucket("d1999")) == 0
    assert raw.llen(dead("t")) == 1000


# --------------------------------------------------------------------------
# reschedule


def test_reschedule_moves_the_due_time_and_the_ttl(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "j", 100, b"x", ready_max_lifetime=50)
        assert 149_000 < raw.pttl(bucket("j")) <= 150_005  # the script's clock and PTTL's may differ by a millisecond
        before = redis_now(raw)
        due = d.reschedule("j", 5)
        after = redis_now(raw)
        assert due is not None and before + 5 - 0.002 <= due <= after + 5 + 0.002
        score = raw.zscore(POOL, "j")
        assert score is not None and abs(score - due) < 0.0005
        assert 54_000 < raw.pttl(bucket("j")) <= 55_005  # the same 50 s after the new due time
        later = d.reschedule("j", 200.5)
        assert later is not None and abs(later - (due + 195.5)) < 1
        assert 249_000 < raw.pttl(bucket("j")) <= 250_505


def test_reschedule_of_a_job_not_waiting_is_none(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        assert d.reschedule("unknown", 1) is None
        make_ready(d, raw, "t", "ready")
        assert d.reschedule("ready", 1) is None  # already in its ready queue
        job = reserve_one(d, "t")
        assert d.reschedule("ready", 1) is None  # reserved
        assert d.bury(job) is True
        assert d.reschedule("ready", 1) is None  # dead
        d.push("t", "gone", 10)
        raw.delete(bucket("gone"))
        assert d.reschedule("gone", 1) is None  # never resurrected
    assert raw.exists(bucket("gone")) == 0


def test_reschedule_keeps_a_retry_without_ttl(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        assert d.release(reserve_one(d, "t"), 60) is True
        due = d.reschedule("j", 1)
        assert due is not None
    assert raw.pttl(bucket("j")) == -1


# --------------------------------------------------------------------------
# breserve


@pytest.mark.parametrize("timeout", [0.2, 0.35])
def test_breserve_times_out_with_none(url: str, raw: "redis.Redis", timeout: float) -> None:
    with Delayer(url) as d:
        start = time.monotonic()
        assert d.breserve("t", 5, timeout) is None
        elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + 1.5
    assert raw.dbsize() == 0


def test_breserve_returns_a_ready_job_at_once(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j", b"x")
        job = d.breserve("t", 10, 0)  # 0 = forever, but one is there
        assert job is not None and (job.id, job.body, job.attempts) == ("j", b"x", 1)
        assert raw.zscore(RESERVED, "j") is not None


def test_breserve_wakes_when_an_id_is_pushed(url: str, raw: "redis.Redis") -> None:
    got: List[Optional[ReservedMessage]] = []

    def worker() -> None:
        with Delayer(url) as d:
            got.append(d.breserve("t", 10, 5))

    thread = threading.Thread(target=worker)
    start = time.monotonic()
    thread.start()
    wait_for_blocked_client(raw)
    raw.hset(bucket("late"), mapping={"topic": "t", "body": "b"})
    raw.lpush(ready("t"), "late")
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - start < 4
    assert len(got) == 1 and got[0] is not None
    assert (got[0].id, got[0].body, got[0].attempts) == ("late", b"b", 1)
    assert raw.llen(ready("t")) == 0
    assert raw.zscore(RESERVED, "late") is not None


def test_breserve_skips_stale_ids_and_keeps_waiting(url: str, raw: "redis.Redis") -> None:
    got: List[Optional[ReservedMessage]] = []

    def worker() -> None:
        with Delayer(url) as d:
            got.append(d.breserve("t", 10, 5))

    raw.lpush(ready("t"), "ghost")  # no bucket: reserve.lua drops it, breserve waits again
    thread = threading.Thread(target=worker)
    thread.start()
    wait_for_blocked_client(raw)
    assert raw.llen(ready("t")) == 0
    raw.hset(bucket("real"), mapping={"topic": "t", "body": "r"})
    raw.lpush(ready("t"), "real")
    thread.join(10)
    assert len(got) == 1 and got[0] is not None and got[0].id == "real"


def test_only_one_of_two_waiting_workers_gets_a_job(url: str, raw: "redis.Redis") -> None:
    got: List[Optional[ReservedMessage]] = []
    lock = threading.Lock()

    def worker() -> None:
        with Delayer(url) as d:
            job = d.breserve("t", 10, 1.5)
        with lock:
            got.append(job)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while int(raw.info("clients")["blocked_clients"]) < 2:
        assert time.monotonic() < deadline, "the two workers did not block"
        time.sleep(0.005)
    raw.hset(bucket("one"), mapping={"topic": "t", "body": "1"})
    raw.lpush(ready("t"), "one")
    for t in threads:
        t.join(10)
    assert sorted((j.id if j else "-") for j in got) == ["-", "one"]
    assert raw.hget(bucket("one"), "attempts") == b"1"


def test_breserve_does_not_lose_the_id_when_no_job_is_taken(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "keep", b"k")
        # reserve.lua cannot take a receipt (wrong type): the call fails, and
        # the id must still be in its ready queue, its bucket untouched.
        raw.rpush("delayer:receipt_seq", "not a counter")
        with pytest.raises(ProtocolError, match="WRONGTYPE"):
            d.breserve("t", 10, 1)
        assert raw.lrange(ready("t"), 0, -1) == [b"keep"]
        assert raw.hgetall(bucket("keep")) == {b"topic": b"t", b"body": b"k"}
        assert raw.zcard(RESERVED) == 0
        raw.delete("delayer:receipt_seq")
        job = d.breserve("t", 10, 1)
        assert job is not None and job.id == "keep" and job.attempts == 1


def test_the_wait_of_breserve_takes_nothing(url: str, raw: "redis.Redis") -> None:
    # Ids queued behind a live one stay in order: BLMOVE puts back what it moves.
    with Delayer(url) as d:
        for job_id in ("a", "b", "c"):
            d.push("t", job_id, 0, job_id)
        move_until(raw, 3)
        assert raw.lrange(ready("t"), 0, -1) == [b"c", b"b", b"a"]
        job = d.breserve("t", 10, 1)
        assert job is not None and job.id == "a"
        assert raw.lrange(ready("t"), 0, -1) == [b"c", b"b"]


def test_reliable_scripts_are_reloaded_after_script_flush(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        make_ready(d, raw, "t", "j")
        raw.script_flush()
        job = reserve_one(d, "t")
        raw.script_flush()
        assert d.release(job, 0) is True
        move_until(raw, 1)
        raw.script_flush()
        again = d.breserve("t", 5, 1)
        assert again is not None
        raw.script_flush()
        assert d.bury(again) is True
        raw.script_flush()
        assert len(d.dead_letters("t")) == 1
        raw.script_flush()
        assert d.requeue_dead("t") == 1
        raw.script_flush()
        assert d.reschedule("j", 10) is not None
        make_due_again(d, raw, "j")
        job = reserve_one(d, "t")
        raw.script_flush()
        assert d.ack(job) is True


def test_a_custom_prefix_is_honoured_by_reserve_and_dead_letters(url: str, raw: "redis.Redis") -> None:
    prefix = "shop:"
    with Delayer(url, prefix=prefix) as d:
        d.push("t", "j", 0, b"x")
        move_until(raw, 1, prefix=prefix)
        job = reserve_one(d, "t")
        assert raw.zscore(prefix + "reserved", "j") is not None
        assert raw.get(prefix + "receipt_seq") == job.receipt.encode()
        assert d.bury(job) is True
        assert raw.lrange(prefix + "dead:t", 0, -1) == [b"j"]
        assert d.purge_dead("t") == 1
    assert set(raw.keys("*")) == {b"shop:receipt_seq", b"shop:topics", b"shop:outcomes"}


def test_invalid_reliable_input_is_refused_before_redis(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        raw.config_resetstat()
        for call in (
            lambda: d.reserve("t", 0),
            lambda: d.reserve("t", -1),
            lambda: d.breserve("t", 0, 1),
            lambda: d.touch("j", 0),
            lambda: d.touch("j", -1),
            lambda: d.touch("j", 1, receipt=""),
            lambda: d.push("t", "j", 0, max_attempts=-1),
            lambda: d.push("t", "j", 0, max_attempts=1_000_001),
            lambda: d.push("t", "j", 0, max_attempts=True),
            lambda: d.dead_letters("t", 0, 0),
            lambda: d.dead_letters("t", 0, 1001),
        ):
            with pytest.raises(InvalidArgument):
                call()
        with pytest.raises(InvalidArgument, match="below"):
            Backoff.exponential(2, 1)
        stats = raw.info("commandstats")
    assert not any(k in stats for k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_blmove"))
    assert raw.dbsize() == 0
