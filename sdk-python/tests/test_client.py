"""The synchronous client against a real redis-server, with the real move.lua."""

from __future__ import annotations

import os
import threading
import time

import pytest
import redis

from delayer import Delayer, InvalidArgument, Job, Message, ProtocolError

from conftest import bucket, move, move_until, redis_now, wait_until_past

POOL = "delayer:job_pool"



def ready(topic: str, prefix: str = "delayer:") -> str:
    return f"{prefix}ready_queue:{topic}"


def test_push_writes_the_protocol_layout(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        before = redis_now(raw)
        due = d.push("mail", "order-1:confirm", 10, b"hello", ready_max_lifetime=100)
        after = redis_now(raw)
    # scheduled_count: the per-topic number of waiting jobs (PROTOCOL.md, "Inspecting jobs")
    assert set(raw.keys("*")) == {POOL.encode(), bucket("order-1:confirm").encode(), b"delayer:scheduled_count"}
    assert raw.type(bucket("order-1:confirm")) == b"hash"
    assert raw.hgetall(bucket("order-1:confirm")) == {b"topic": b"mail", b"body": b"hello"}
    pttl = raw.pttl(bucket("order-1:confirm"))
    assert 109_000 < pttl <= 110_000
    score = raw.zscore(POOL, "order-1:confirm")
    assert score is not None
    assert abs(score - due) < 0.0005
    assert before + 10 - 0.002 <= due <= after + 10 + 0.002
    assert round(due * 1000) == pytest.approx(due * 1000, abs=1e-3)  # millisecond precision


def test_push_rounds_delay_and_sets_ttl_in_ms(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "j", 1.2506, b"", 1)
    pttl = raw.pttl(bucket("j"))
    assert 2_200 < pttl <= 2_251


def test_repush_replaces_the_job(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("a", "j", 100, b"old")
        raw.hset(bucket("j"), "stale", "x")
        due = d.push("b", "j", 0, "new")
    assert raw.hgetall(bucket("j")) == {b"topic": b"b", b"body": b"new"}
    assert raw.zcard(POOL) == 1
    assert abs((raw.zscore(POOL, "j") or 0) - due) < 0.0005


def test_pop_on_empty_queue_is_none(url: str) -> None:
    with Delayer(url) as d:
        assert d.pop("nothing") is None


def test_jobs_come_out_first_due_first_out(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "c", 0.05, b"3")
        d.push("t", "a", 0.10, b"1")
        last = d.push("t", "b", 0.15, b"2")
        d.push("other", "z", 0, b"")
        assert d.pop("t") is None  # nothing is ready before the server moves it
        wait_until_past(raw, last)
        move_until(raw, 4)
        assert raw.zcard(POOL) == 0
        got = [d.pop("t"), d.pop("t"), d.pop("t"), d.pop("t")]
        assert got == [
            Message("c", "t", b"3"),
            Message("a", "t", b"1"),
            Message("b", "t", b"2"),
            None,
        ]
        assert d.pop("other") == Message("z", "other", b"")
    assert set(raw.keys("*")) == {b"delayer:topics"}  # buckets deleted as jobs are handed out; moved topics stay known


def test_pop_skips_ids_whose_bucket_is_gone(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "gone", 0)
        d.push("t", "expired", 0)
        last = d.push("t", "live", 0.001, b"ok")
        wait_until_past(raw, last)
        move_until(raw, 3)
        raw.delete(bucket("gone"))
        assert d.remove("expired") is True  # removed after it became ready
        assert d.pop("t") == Message("live", "t", b"ok")
        assert d.pop("t") is None
    assert raw.llen(ready("t")) == 0


def test_bpop_gets_a_job_pushed_from_another_connection(url: str, raw: "redis.Redis") -> None:
    def producer() -> None:
        other = redis.Redis.from_url(url)
        time.sleep(0.1)  # let bpop block first
        other.hset(bucket("late"), mapping={"topic": "t", "body": "b"})
        other.lpush(ready("t"), "late")
        other.close()

    thread = threading.Thread(target=producer)
    with Delayer(url) as d:
        start = time.monotonic()
        thread.start()
        msg = d.bpop("t", 5)
        elapsed = time.monotonic() - start
    thread.join(5)
    assert msg == Message("late", "t", b"b")
    assert elapsed < 4
    assert raw.dbsize() == 0


def test_bpop_returns_a_ready_job_at_once(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "j", 0, b"x")
        move_until(raw, 1)
        assert d.bpop("t", 0) == Message("j", "t", b"x")  # 0 = forever, but one is there


@pytest.mark.parametrize("timeout", [0.2, 0.35])
def test_bpop_times_out_with_none(url: str, timeout: float) -> None:
    with Delayer(url) as d:
        start = time.monotonic()
        assert d.bpop("t", timeout) is None
        elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + 1.5


def test_bpop_skips_a_gone_id_and_keeps_waiting(url: str, raw: "redis.Redis") -> None:
    raw.lpush(ready("t"), "ghost")
    with Delayer(url) as d:
        start = time.monotonic()
        assert d.bpop("t", 0.3) is None
        assert time.monotonic() - start >= 0.3
        assert raw.llen(ready("t")) == 0

        raw.lpush(ready("t"), "ghost2")

        def producer() -> None:
            time.sleep(0.1)
            other = redis.Redis.from_url(url)
            other.hset(bucket("real"), mapping={"topic": "t", "body": "r"})
            other.lpush(ready("t"), "real")
            other.close()

        thread = threading.Thread(target=producer)
        thread.start()
        assert d.bpop("t", 5) == Message("real", "t", b"r")
        thread.join(5)


def test_bpop_parks_an_id_whose_bucket_is_not_a_hash(url: str, raw: "redis.Redis") -> None:
    raw.set(bucket("weird"), "a string")
    raw.lpush(ready("t"), "weird")
    with Delayer(url) as d:
        assert d.bpop("t", 0.2) is None
    assert raw.lrange("delayer:malformed", 0, -1) == [b"weird"]
    assert raw.get(bucket("weird")) == b"a string"


def test_remove_before_due_prevents_delivery(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        due = d.push("t", "cancel-me", 0.05, b"x")
        assert d.remove("cancel-me") is True
        assert raw.dbsize() == 0
        wait_until_past(raw, due)
        assert move(raw)[0] == 0
        assert d.pop("t") is None
        assert d.remove("cancel-me") is False
        assert d.remove("never-pushed") is False


def test_remove_after_pop_is_false(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "j", 0)
        move_until(raw, 1)
        assert d.pop("t") is not None
        assert d.remove("j") is False


def test_binary_and_large_bodies_round_trip(url: str, raw: "redis.Redis") -> None:
    every_byte = bytes(range(256))
    big = os.urandom(1024 * 1024)
    with Delayer(url) as d:
        d.push("bin", "every-byte", 0, every_byte)
        d.push("bin", "big", 0, big)
        d.push("bin", "empty", 0, b"")
        d.push("bin", "text", 0, "żółw ✓")
        move_until(raw, 4)
        got = {}
        while (m := d.pop("bin")) is not None:
            got[m.id] = m
    assert got["every-byte"].body == every_byte
    assert got["big"].body == big
    assert got["empty"].body == b""
    assert got["text"].text == "żółw ✓"


def test_a_job_written_by_the_delayer_1x_php_client_is_popped(url: str, raw: "redis.Redis") -> None:
    now = int(redis_now(raw))
    with raw.pipeline(transaction=True) as pipe:  # MULTI ... EXEC, as the 1.x PHP client
        pipe.execute_command("HMSET", bucket("php-1"), "topic", "legacy", "body", '{"a":1}')
        pipe.execute_command("EXPIRE", bucket("php-1"), 0 + 604800)
        pipe.execute_command("ZADD", POOL, now + 0, "php-1")
        pipe.execute()
    move_until(raw, 1)
    with Delayer(url) as d:
        assert d.pop("legacy") == Message("php-1", "legacy", b'{"a":1}')


def test_a_job_pushed_by_the_sdk_is_read_by_a_1x_consumer(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("legacy", "sdk-1", 0, b"payload")
    move_until(raw, 1)
    # Delayer 1.x pop: RPOP ready; HGETALL bucket; DEL bucket
    assert raw.rpop(ready("legacy")) == b"sdk-1"
    assert raw.hgetall(bucket("sdk-1")) == {b"topic": b"legacy", b"body": b"payload"}
    assert raw.delete(bucket("sdk-1")) == 1
    assert set(raw.keys("*")) == {b"delayer:topics"}  # move.lua records the topics it moved (PROTOCOL.md, "Inspecting jobs")


def test_push_many(url: str, raw: "redis.Redis") -> None:
    jobs = [Job("bulk", f"job-{i}", i % 3, f"body-{i}") for i in range(2500)]
    jobs.append(Job("bulk", "lifetime", 0.5, b"x", ready_max_lifetime=5))
    with Delayer(url) as d:
        now = redis_now(raw)
        dues = d.push_many(jobs)
        assert d.push_many([]) == []
    assert len(dues) == len(jobs)
    assert raw.zcard(POOL) == len(jobs)
    for i in (0, 1, 2, 1234, 2499):
        assert abs((raw.zscore(POOL, f"job-{i}") or 0) - dues[i]) < 0.0005
        assert now + (i % 3) - 0.01 < dues[i] < now + (i % 3) + 2
    assert raw.hgetall(bucket("job-1234")) == {b"topic": b"bulk", b"body": b"body-1234"}
    assert 5_000 < raw.pttl(bucket("lifetime")) <= 5_500


def command_calls(raw: "redis.Redis") -> dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT (``evalsha``, ``script|load``, ...)."""
    stats = raw.info("commandstats")
    return {k[len("cmdstat_") :]: int(v["calls"]) for k, v in stats.items()}


def test_push_many_sends_100_jobs_per_push_many_lua_call(url: str, raw: "redis.Redis") -> None:
    topics = ("mail", "sms", "push")
    jobs = [Job(topics[i % 3], f"m-{i}", i % 7, f"body-{i}".encode(), ready_max_lifetime=60 + i) for i in range(250)]
    with Delayer(url) as d:
        raw.config_resetstat()
        now = redis_now(raw)
        dues = d.push_many(jobs)
        calls = command_calls(raw)
    # 250 jobs: three push_many.lua calls (100, 100, 50) in one pipeline, no SCRIPT LOAD
    assert calls.get("evalsha") == 3
    assert calls.get("script|load", calls.get("script")) is None
    assert "eval" not in calls
    assert len(dues) == 250
    assert raw.zcard(POOL) == 250
    for i, job in enumerate(jobs):
        assert raw.hgetall(bucket(job.id)) == {b"topic": job.topic.encode(), b"body": f"body-{i}".encode()}
        score = raw.zscore(POOL, job.id)
        assert score is not None and abs(score - dues[i]) < 0.0005, i
        assert now + i % 7 - 0.01 < dues[i] < now + i % 7 + 2
        ttl = raw.pttl(bucket(job.id))
        # The TTL counts down from the push: allow what has elapsed since, measured.
        elapsed_ms = (redis_now(raw) - now) * 1000
        assert (i % 7 + 60 + i) * 1000 - elapsed_ms - 50 < ttl <= (i % 7 + 60 + i) * 1000
    for topic in topics:
        assert raw.exists(ready(topic)) == 0


def test_push_many_due_times_follow_the_jobs_order(url: str, raw: "redis.Redis") -> None:
    jobs = [Job("t", f"o-{i}", (250 - i) * 10, b"") for i in range(250)]
    jobs.append(Job("t", "o-0", 5))  # the same id again: the later one wins, both get a due time
    with Delayer(url) as d:
        dues = d.push_many(jobs)
    assert len(dues) == 251
    assert all(a > b for a, b in zip(dues[:249], dues[1:250]))
    assert dues[250] < dues[249]
    assert raw.zcard(POOL) == 250
    assert abs((raw.zscore(POOL, "o-0") or 0) - dues[250]) < 0.0005


def test_push_many_survives_script_flush(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push_many([Job("t", "warm", 0)])
        for round_ in range(2):
            raw.script_flush()
            dues = d.push_many([Job(f"t{i % 3}", f"f{round_}-{i}", 0, str(i)) for i in range(1250)])
            assert len(dues) == 1250
    assert raw.zcard(POOL) == 1 + 2 * 1250
    assert raw.hgetall(bucket("f1-1249")) == {b"topic": b"t1", b"body": b"1249"}


@pytest.mark.parametrize("bad_at", [0, 150, 249])
def test_push_many_a_bad_job_anywhere_rejects_the_whole_list(url: str, raw: "redis.Redis", bad_at: int) -> None:
    jobs = [Job("t", f"ok-{i}", 0) for i in range(250)]
    jobs[bad_at] = Job("t", "", 0)
    raw.config_resetstat()
    with Delayer(url) as d:
        with pytest.raises(InvalidArgument, match=rf"jobs\[{bad_at}\]"):
            d.push_many(jobs)
    assert raw.dbsize() == 0
    calls = command_calls(raw)
    assert not any(k.startswith(("evalsha", "eval", "script")) for k in calls)


def test_a_redis_error_in_push_many_raises(url: str, raw: "redis.Redis") -> None:
    raw.set(POOL, "not a zset")
    with Delayer(url) as d:
        with pytest.raises(ProtocolError, match="WRONGTYPE"):
            d.push_many([Job("t", "a", 0), Job("t", "b", 0)])


def test_scripts_are_reloaded_after_script_flush(url: str, raw: "redis.Redis") -> None:
    with Delayer(url) as d:
        d.push("t", "before", 0)
        raw.script_flush()
        d.push("t", "after", 0)
        raw.script_flush()
        d.push_many([Job("t", "bulk", 0)])
        move_until(raw, 3)
        raw.script_flush()
        assert d.pop("t") is not None
        raw.script_flush()
        assert d.bpop("t", 1) is not None
        raw.script_flush()
        assert d.remove("nope") is False


def test_custom_prefix_is_honoured(url: str, raw: "redis.Redis") -> None:
    prefix = "shop:delayer:"
    with Delayer(url, prefix=prefix) as d:
        d.push("t", "j", 0, b"p")
        assert raw.exists(prefix + "job_pool") == 1
        assert raw.exists(bucket("j", prefix)) == 1
        assert raw.exists(POOL) == 0
        move_until(raw, 1, prefix=prefix)
        assert raw.llen(ready("t", prefix)) == 1
        assert d.pop("t") == Message("j", "t", b"p")
        d.push("t", "k", 0)
        assert d.remove("k") is True
    assert set(raw.keys("*")) == {prefix.encode() + b"topics"}  # move.lua records the topics it moved (PROTOCOL.md, "Inspecting jobs")


def test_existing_client_is_used_and_left_open(url: str, raw: "redis.Redis") -> None:
    client = redis.Redis.from_url(url)
    with Delayer(client=client) as d:
        d.push("t", "j", 0)
    assert client.ping() is True
    client.close()
    assert raw.zcard(POOL) == 1


def test_a_decoding_client_is_refused(url: str) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    with pytest.raises(InvalidArgument):
        Delayer(client=client)
    client.close()
