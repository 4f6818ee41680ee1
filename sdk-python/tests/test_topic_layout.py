"""The sync client on the per-topic layout (``layout="topic"``, issue 12;
PROTOCOL.md "The per-topic layout" and "Operations in the per-topic layout"),
against a real redis-server. The server's part (move_topic.lua, release_topic.lua's
expiry) is played with its own scripts (topickit); test_topic_layout_server.py
runs the real server binary."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

import pytest
import redis

from delayer import (
    ConfigError,
    Delayer,
    IdTakenError,
    InvalidArgument,
    Job,
    NotReplicatedError,
    ReservedMessage,
    Worker,
)
from delayer.keys import Keys

from conftest import redis_now
from topickit import TopicServer, WakeListener, key, move_until, wait_for
from workerkit import Recorder, Running

P = "shop:"


@pytest.fixture
def d(url: str) -> Iterator[Delayer]:
    with Delayer(url, P, layout="topic") as client:
        yield client


def k(topic: str, kind: str) -> str:
    return key(P, topic, kind)


def reserve_one(d: Delayer, topic: str, ttr: float = 30) -> ReservedMessage:
    job = d.reserve(topic, ttr)
    assert job is not None
    return job


def ready_job(d: Delayer, raw: "redis.Redis", topic: str, job_id: str, body: bytes = b"", **kw: object) -> float:
    due = d.push(topic, job_id, 0, body, **kw)  # type: ignore[arg-type]
    move_until(raw, topic, 1, P)
    return due


# -- names -------------------------------------------------------------------


def test_names_of_a_topic_in_each_layout() -> None:
    n = Keys("shop:", "topic").names("mail")
    assert (n.pool, n.ready, n.reserved, n.dead, n.malformed, n.receipt_seq) == (
        "shop:{mail}:pool", "shop:{mail}:ready", "shop:{mail}:reserved", "shop:{mail}:dead",
        "shop:{mail}:malformed", "shop:{mail}:receipt_seq",
    )
    assert n.bucket("42") == "shop:{mail}:job:42" and n.bucket_prefix == "shop:{mail}:job:"
    assert (n.counts, n.release4, n.release_head) == ((), "shop:{mail}:dead", ("shop:{mail}:job:",))
    assert (n.push_script, n.push_many_script, n.remove_script, n.dead_script, n.release_script) == (
        "push_topic", "push_many_topic", "remove_topic", "dead_topic", "release_topic")
    assert (Keys("shop:", "topic").due, Keys("shop:", "topic").topics, Keys("shop:", "topic").wake) == (
        "shop:due", "shop:topics", "shop:wake")
    c = Keys("shop:").names("mail")
    assert (c.pool, c.ready, c.reserved, c.dead, c.counts, c.release4, c.release_head) == (
        "shop:job_pool", "shop:ready_queue:mail", "shop:reserved", "shop:dead:mail", ("shop:scheduled_count",),
        "shop:scheduled_count", ("shop:job_bucket:", "shop:dead:"),
    )
    assert (c.push_script, c.push_many_script, c.remove_script, c.dead_script, c.release_script) == (
        "push", "push_many", "remove", "dead", "release")
    with pytest.raises(ValueError):
        Keys("shop:", "columns")


# -- push --------------------------------------------------------------------


def test_push_writes_the_topics_keys_and_announces(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    before = redis_now(raw)
    due = d.push("mail", "o-1", 30, b"hello", max_attempts=3)
    assert before + 29 < due < redis_now(raw) + 31
    assert raw.zscore(k("mail", "pool"), "o-1") == due
    # the per-topic layout's bucket keeps its due time (read for the ready-queue age)
    assert raw.hgetall(k("mail", "job:o-1")) == {
        b"topic": b"mail", b"body": b"hello", b"max_attempts": b"3", b"due": b"%.3f" % due}
    assert wake.next() == b"%.3f mail" % due  # push.lua's announcement: the server keeps the index
    # nothing of the classic layout, and no index: the server's
    assert sorted(raw.keys("*")) == sorted(x.encode() for x in (k("mail", "pool"), k("mail", "job:o-1")))


def test_ids_are_per_topic(d: Delayer, raw: "redis.Redis") -> None:
    d.push("a", "42", 0, b"for a")
    d.push("b", "42", 0, b"for b")
    assert raw.hget(k("a", "job:42"), "body") == b"for a" and raw.hget(k("b", "job:42"), "body") == b"for b"
    move_until(raw, "a", 1, P)
    move_until(raw, "b", 1, P)
    a, b = d.pop("a"), d.pop("b")
    assert a is not None and b is not None
    assert (a.id, a.topic, a.body) == ("42", "a", b"for a")
    assert (b.id, b.topic, b.body) == ("42", "b", b"for b")
    # if_absent looks at the topic's own id only
    d.push("a", "7", 60)
    d.push("b", "7", 60, if_absent=True)
    with pytest.raises(IdTakenError) as e:
        d.push("a", "7", 60, if_absent=True)
    assert e.value.taken[0].topic == "a"


def test_a_push_announces_only_a_new_earliest_due_time(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    first = d.push("t", "1", 100)
    assert wake.next() == b"%.3f t" % first
    later = d.push("t", "2", 200)  # not before the pool's earliest: nothing announced
    u = d.push("u", "1", 300)  # another topic's pool: its own earliest
    third = d.push("t", "3", 50)
    # messages arrive in order: had the second push announced, it would come first
    assert later > first and [wake.next(), wake.next()] == [b"%.3f u" % u, b"%.3f t" % third]
    assert not raw.exists(P + "due") and not raw.exists(P + "topics")  # the server's to write


def test_push_many_makes_one_call_per_topic_and_keeps_the_order(d: Delayer, raw: "redis.Redis") -> None:
    topics = ["a", "b", "c"]
    jobs = [Job(topics[i % 3], f"j{i}", 10 + i, f"body{i}") for i in range(250)]
    dues = d.push_many(jobs)
    assert len(dues) == 250
    for job, due in zip(jobs, dues):
        assert raw.zscore(k(job.topic, "pool"), job.id) == due
    assert dues == sorted(dues)  # delays grow with the index: the reply is in input order
    for t in topics:
        assert raw.zcard(k(t, "pool")) == len([j for j in jobs if j.topic == t])
    assert not raw.exists(P + "scheduled_count")
    # if_absent: the taken ones are reported in order, the others written
    with pytest.raises(IdTakenError) as e:
        d.push_many([Job("a", "new1", 5), Job("b", "j1", 5), Job("b", "new2", 5), Job("c", "j0", 5)], if_absent=True)
    assert [t.id for t in e.value.taken] == ["j1"]
    assert e.value.due[1] is None and None not in (e.value.due[0], e.value.due[2], e.value.due[3])
    assert raw.zscore(k("a", "pool"), "new1") == e.value.due[0]
    assert raw.zscore(k("c", "pool"), "j0") == e.value.due[3]  # "c"'s own j0 was not taken: ids are per topic


def test_a_durable_push_still_announces(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    with pytest.raises(NotReplicatedError) as e:  # no replica here
        d.push("t", "1", 5, durable=0.05)
    assert raw.zscore(k("t", "pool"), "1") == e.value.due
    assert wake.next() == b"%.3f t" % e.value.due
    with pytest.raises(NotReplicatedError) as e:
        d.push_many([Job("u", "1", 3), Job("v", "1", 4)], durable=0.05)
    assert [wake.next(), wake.next()] == [b"%.3f u" % e.value.due[0], b"%.3f v" % e.value.due[1]]


# -- pop / bpop / remove / reschedule ------------------------------------------


def test_pop_and_bpop_take_from_the_topics_ready_list(d: Delayer, raw: "redis.Redis") -> None:
    assert d.pop("t") is None
    assert d.bpop("t", 0.05) is None
    ready_job(d, raw, "t", "1", b"one")
    ready_job(d, raw, "t", "2", b"two")
    assert raw.lrange(k("t", "ready"), 0, -1) == [b"2", b"1"]
    m = d.pop("t")
    assert m is not None and (m.id, m.topic, m.body) == ("1", "t", b"one")
    m = d.bpop("t", 5)
    assert m is not None and (m.id, m.body) == ("2", b"two")
    assert not raw.exists(k("t", "job:1"), k("t", "job:2"), k("t", "ready"))


def test_remove_and_reschedule_need_the_topic(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    d.push("t", "1", 100)
    d.push("u", "1", 100)
    assert wake.next() is not None and wake.next() is not None  # the two pushes lowered their topics
    with pytest.raises(InvalidArgument, match=r"^remove\(\) needs the topic in the per-topic layout: "
                                              r"remove\(id, topic=\.\.\.\)$"):
        d.remove("1")
    with pytest.raises(InvalidArgument, match=r"reschedule\(\) needs the topic in the per-topic layout: "
                                              r"reschedule\(id, delay, topic=\.\.\.\)"):
        d.reschedule("1", 5)
    due = d.reschedule("1", 5, topic="t")
    assert due is not None and raw.zscore(k("t", "pool"), "1") == due
    assert wake.next() == b"%.3f t" % due  # before the pool's earliest: announced
    assert d.remove("1", topic="t") is True
    assert d.remove("1", topic="t") is False
    assert raw.zscore(k("u", "pool"), "1") is not None  # the other topic's 1 stays
    assert d.reschedule("nope", 1, topic="t") is None


# -- at least once -------------------------------------------------------------


def test_reserve_ack_touch_on_the_topics_keys(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    ready_job(d, raw, "t", "1", b"x")
    assert wake.next() is not None  # the push's
    job = reserve_one(d, "t", 30)
    assert (job.id, job.topic, job.body, job.attempts) == ("1", "t", b"x", 1)
    assert raw.zscore(k("t", "reserved"), "1") == round(job.deadline * 1000)
    assert raw.get(k("t", "receipt_seq")) == job.receipt.encode()
    # the reservation's deadline is the topic's next time: reserve.lua announces it
    assert wake.next() == b"%.3f t" % job.deadline
    # by id, the topic is needed
    with pytest.raises(InvalidArgument) as e:
        d.ack("1", job.receipt)
    assert str(e.value) == ("ack() needs the topic in the per-topic layout: ack(job) with the reserved job, "
                            "or ack(id, receipt, topic=...)")
    with pytest.raises(InvalidArgument, match=r"touch\(id, ttr, receipt, topic=\.\.\.\)"):
        d.touch("1", 60)
    with pytest.raises(InvalidArgument, match="a ReservedMessage carries its own"):
        d.ack(job, topic="t")
    deadline = d.touch("1", 60, job.receipt, topic="t")
    assert deadline is not None and raw.zscore(k("t", "reserved"), "1") == round(deadline * 1000)
    assert wake.next(0.2) is None  # a later deadline than the set's earliest: nothing to announce
    assert d.ack("1", "999", topic="t") is False  # not this reservation
    assert d.ack(job) is True
    assert d.ack(job) is False
    assert not raw.exists(k("t", "job:1"), k("t", "reserved"))


def test_release_bury_and_dead_letters(d: Delayer, raw: "redis.Redis", wake: WakeListener) -> None:
    ready_job(d, raw, "t", "1", b"one", max_attempts=5)
    ready_job(d, raw, "t", "2", b"two")
    assert wake.next() is not None
    a, b = reserve_one(d, "t"), reserve_one(d, "t")
    assert {a.id, b.id} == {"1", "2"}
    one, two = (a, b) if a.id == "1" else (b, a)
    assert wake.next() is not None and wake.next() is not None  # the reservations' deadlines
    with pytest.raises(InvalidArgument, match=r"release\(id, delay, receipt, topic=\.\.\.\)"):
        d.release("1", 5, one.receipt)
    assert d.release("1", 5, one.receipt, topic="t", error="boom") is True
    due = raw.zscore(k("t", "pool"), "1")
    assert due is not None and wake.next() == b"%.3f t" % due  # a retry is scheduled: announced
    assert raw.hget(k("t", "job:1"), "last_error") == b"boom"
    with pytest.raises(InvalidArgument, match=r"bury\(id, receipt, topic=\.\.\.\)"):
        d.bury("2")
    assert d.bury(two, error="never") is True
    assert raw.lrange(k("t", "dead"), 0, -1) == [b"2"]
    assert wake.next(0.2) is None  # a bury schedules nothing
    dead = d.dead_letters("t")
    assert [(x.id, x.topic, x.body, x.reason) for x in dead] == [("2", "t", b"two", "buried")]
    assert d.requeue_dead("t") == 1
    assert raw.zscore(k("t", "pool"), "2") is not None and raw.llen(k("t", "dead")) == 0
    assert (wake.next() or b"").endswith(b" t")  # due now: announced
    assert raw.hget(k("t", "job:2"), "attempts") == b"0"
    # and purge: bury it again first
    move_until(raw, "t", 2, P)
    again = [reserve_one(d, "t"), reserve_one(d, "t")]
    for job in again:
        assert d.bury(job) is True
    assert d.requeue_dead("t", []) == 0 and d.purge_dead("t", ["2"]) == 1
    assert d.purge_dead("t") == 1
    assert not raw.exists(k("t", "job:1"), k("t", "job:2"), k("t", "dead"))


def test_reserve_many_acks_jobs_of_every_topic(d: Delayer, raw: "redis.Redis") -> None:
    for t in ("a", "b"):
        for i in range(3):
            ready_job(d, raw, t, f"{t}{i}")
    acked, jobs_a = d.reserve_many("a", 30, 3)
    assert acked == [] and sorted(j.id for j in jobs_a) == ["a0", "a1", "a2"]
    _, jobs_b = d.reserve_many("b", 30, 2)
    assert raw.zscore(k("b", "reserved"), jobs_b[0].id) == round(jobs_b[0].deadline * 1000)
    # acks of "a" and "b" (and an id of "b", the call's topic), then one more job of "b"
    acks: List[object] = [jobs_a[0], jobs_b[0], jobs_a[1], jobs_b[1].id, jobs_a[0]]
    acked, more = d.reserve_many("b", 30, 5, acks)  # type: ignore[arg-type]
    assert acked == [True, True, True, True, False]
    assert [j.id for j in more] == ["b2"]
    assert raw.zrange(k("a", "reserved"), 0, -1) == [jobs_a[2].id.encode()]
    assert raw.zrange(k("b", "reserved"), 0, -1) == [b"b2"]
    # only acks, on a topic with nothing to reserve
    acked, none = d.reserve_many("c", 30, 0, [jobs_a[2], more[0]])
    assert (acked, none) == ([True, True], [])
    assert not raw.keys("*reserved*") and not raw.keys("*{c}*")


def test_breserve_waits_on_the_topics_list(d: Delayer, raw: "redis.Redis") -> None:
    assert d.breserve("t", 30, 0.05) is None
    ready_job(d, raw, "t", "1")
    job = d.breserve("t", 30, 5)
    assert job is not None and job.id == "1" and raw.zscore(k("t", "reserved"), "1") == round(job.deadline * 1000)


# -- inspecting ----------------------------------------------------------------


def test_lookup_listings_and_stats(d: Delayer, raw: "redis.Redis") -> None:
    d.push("a", "s1", 100, b"abc")
    d.push("a", "s2", 50)
    ready_job(d, raw, "a", "r1")
    ready_job(d, raw, "b", "r1")  # same id, another topic
    job = reserve_one(d, "b")
    info = d.job("a", "s1")
    assert (info.state, info.topic, info.body_size, info.due) == ("scheduled", "a", 3, raw.zscore(k("a", "pool"), "s1"))
    assert d.job("a", "r1").state == "ready" and d.job("b", "r1").state == "reserved"
    assert d.job("b", "r1").deadline == job.deadline
    assert d.job("b", "s1").state == "unknown"
    page = d.list_scheduled("a")
    assert [x.id for x in page.items] == ["s2", "s1"] and page.next is None
    assert [x.id for x in d.list_reserved("b").items] == ["r1"]
    assert d.list_ready("a").items == ["r1"]
    d.bury(job)
    raw.sadd(P + "topics", "a", "b")  # as the server records the topics announced
    stats = d.stats()
    assert [(t.topic, t.scheduled, t.ready, t.reserved, t.dead) for t in stats.topics] == [
        ("a", 2, 1, 0, 0), ("b", 0, 0, 0, 1)]
    assert (stats.scheduled_total, stats.reserved_total) == (2, 0)
    reserve_one(d, "a")
    assert d.stats().reserved_total == 1 and d.stats().topics[0].reserved == 1


def test_many_topics_in_stats(d: Delayer, raw: "redis.Redis") -> None:
    d.push_many([Job(f"t{i:04d}", "1", 60) for i in range(1200)])  # more than one SSCAN and one round of counts
    raw.sadd(P + "topics", *(f"t{i:04d}" for i in range(1200)))  # as the server records the topics announced
    stats = d.stats()
    assert [t.topic for t in stats.topics] == [f"t{i:04d}" for i in range(1200)]
    assert stats.scheduled_total == 1200 and all(t.scheduled == 1 for t in stats.topics)


# -- refusals and configuration -----------------------------------------------------


@pytest.mark.parametrize("topic", ["a{b}", "{", "x}"])
def test_braces_in_a_topic_are_refused_by_name(d: Delayer, topic: str) -> None:
    message = f'topic "{topic}" may not contain "{{" or "}}" in the per-topic layout'
    for call in (
        lambda: d.push(topic, "1", 0),
        lambda: d.push_many([Job("ok", "1", 0), Job(topic, "2", 0)]),
        lambda: d.pop(topic),
        lambda: d.bpop(topic, 1),
        lambda: d.reserve(topic, 1),
        lambda: d.breserve(topic, 1, 1),
        lambda: d.reserve_many(topic, 1, 1),
        lambda: d.remove("1", topic=topic),
        lambda: d.reschedule("1", 1, topic=topic),
        lambda: d.ack("1", topic=topic),
        lambda: d.release("1", topic=topic),
        lambda: d.dead_letters(topic),
        lambda: d.purge_dead(topic),
        lambda: d.job(topic, "1"),
        lambda: d.list_scheduled(topic),
        lambda: d.pause(topic),
        lambda: d.resume(topic),
        lambda: d.is_paused(topic),
        lambda: d.flow(topic),
        lambda: Worker(d).handle(topic, print),
    ):
        with pytest.raises(InvalidArgument) as e:
            call()
        assert message in str(e.value)


def test_braces_are_fine_in_the_classic_layout_and_in_ids(url: str, raw: "redis.Redis") -> None:
    with Delayer(url, "p:") as classic:
        classic.push("a{b}", "1", 60)
    with Delayer(url, "p:", layout="topic") as d:
        d.push("t", "{id}", 60)
    assert raw.exists("p:job_bucket:1", "p:{t}:job:{id}") == 2


def test_constructor_refusals(url: str) -> None:
    with pytest.raises(InvalidArgument, match='prefix "a{" may not contain "{" or "}" in the per-topic layout'):
        Delayer(url, "a{", layout="topic")
    with pytest.raises(InvalidArgument, match="layout must be one of classic, topic, not 'columns'"):
        Delayer(url, layout="columns")
    assert "layout='topic'" in repr(Delayer(url, layout="topic"))
    assert Delayer(url, "a{").keys.layout == "classic"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "delayer.conf"
    path.write_text(text)
    return path


def test_from_config_reads_the_layout(tmp_path: Path, redis_server: object, raw: "redis.Redis") -> None:
    port = raw.connection_pool.connection_kwargs["port"]
    path = write(tmp_path, f"[delayer]\nkey_prefix = cfg:\nlayout = topic\n\n[redis]\nport = {port}\n")
    with Delayer.from_config(path) as d:
        assert (d.keys.prefix, d.keys.layout) == ("cfg:", "topic")
        d.push("t", "1", 60)
    assert raw.exists("cfg:{t}:pool") == 1
    with Delayer.from_config(write(tmp_path, f"[delayer]\nlayout = classic\n[redis]\nport = {port}\n")) as d:
        assert d.keys.layout == "classic"
    with Delayer.from_config(write(tmp_path, f"[redis]\nport = {port}\n")) as d:
        assert d.keys.layout == "classic"
    with pytest.raises(ConfigError) as e:
        Delayer.from_config(write(tmp_path, "[delayer]\nkey_prefix = a\n\nlayout = columns\n"))
    assert str(e.value) == f'{tmp_path / "delayer.conf"}:4: [delayer] layout: "columns" is not one of classic, topic'
    with pytest.raises(ConfigError) as e:
        Delayer.from_config(write(tmp_path, "[delayer]\nlayout = topic\nkey_prefix = x{y}:\n"))
    assert str(e.value) == (f'{tmp_path / "delayer.conf"}:3: [delayer] key_prefix: key_prefix "x{{y}}:" '
                            "contains a brace, which the per-topic layout cannot use")


# -- the Worker ---------------------------------------------------------------------


def test_a_worker_runs_jobs_of_several_topics(url: str, d: Delayer, raw: "redis.Redis") -> None:
    server = TopicServer(url, P)
    try:
        hooks = Recorder()
        w = Worker(d, concurrency=4, hooks=hooks)
        seen: List[tuple] = []
        failed_once: List[str] = []

        def handler(job: object) -> None:
            seen.append((job.topic, job.id))  # type: ignore[attr-defined]
            if job.id == "flaky" and not failed_once:  # type: ignore[attr-defined]
                failed_once.append("x")
                raise ValueError("first time")

        w.handle("a", handler)
        w.handle("b", handler)
        d.push_many([Job(t, f"{i}", 0) for t in ("a", "b") for i in range(20)])
        d.push("b", "flaky", 0, max_attempts=3, backoff=__import__("delayer").Backoff.fixed(0.01))
        running = Running(w)
        wait_for("every ack", lambda: len(hooks.names("acked")) == 41)
        running.stop()
        assert sorted(set(seen)) == sorted([(t, f"{i}") for t in ("a", "b") for i in range(20)] + [("b", "flaky")])
        assert seen.count(("b", "flaky")) == 2 and hooks.names("lost") == []
        assert not raw.keys(P + "{*}:job:*") and not raw.keys(P + "{*}:reserved")
    finally:
        server.close()


def test_a_user_who_may_not_publish_still_pushes(acl_server: object) -> None:
    """push.lua's PUBLISH is a pcall: the announcement is a hint (the
    server's rescan and sweep find the job all the same)."""
    from conftest import ACL_PASSWORD, ACL_USER

    port = acl_server.port  # type: ignore[attr-defined]
    raw = redis.Redis(host="127.0.0.1", port=port, username=ACL_USER, password=ACL_PASSWORD)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            raw.publish("delayer:wake", "1")  # this user has no channels
        with Delayer(f"redis://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{port}/0", layout="topic") as d:
            due = d.push("acl-t", "1", 60)
            assert raw.zscore("delayer:{acl-t}:pool", "1") == due
            assert d.remove("1", topic="acl-t") is True
    finally:
        raw.close()
