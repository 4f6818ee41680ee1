"""``[redis] mode = cluster``: the sync and asyncio clients, and both Workers,
on a real Redis Cluster of three masters (testkit/cluster.py), with topics
spread over every master, the index and wake written across slots, NOSCRIPT
after a script flush, waits longer than the client's read timeout, and a
kill -9 of a master after which calls work again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Set, Tuple, TypeVar

import pytest
import redis
from redis.crc import key_slot

from conftest import REPO_ROOT, run
from topickit import WakeListener, key, move_until

import delayer
from delayer import ConfigError, ConnectionFailed, Delayer, InvalidArgument, Job, Worker
from delayer import aio as delayer_aio

sys.path.insert(0, str(REPO_ROOT / "testkit"))
import cluster as kit  # noqa: E402

T = TypeVar("T")
PREFIX = "delayer:"
PASSWORD = "cluster-pw"
#: Generous: the machine may be slow and busy, and a failover takes seconds.
WITHIN = 90.0


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "delayer.conf"
    path.write_text(text)
    return path


# -- the config rule (no Redis needed) -----------------------------------------------------------

TOPIC_LAYOUT = "[delayer]\nlayout = topic\n\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("[redis]\nmode = cluster\n",
         ":2: [redis] mode: mode = cluster needs nodes (seed nodes: host:port,host:port,...)"),
        (TOPIC_LAYOUT + "[redis]\nmode = cluster\nnodes = a:1\nhost = h\n",
         ":7: [redis] host: not used with mode = cluster: the nodes name the cluster"),
        (TOPIC_LAYOUT + "[redis]\nmode = cluster\nurl = redis://h:1/0\nnodes = a:1\n",
         ":6: [redis] url: not used with mode = cluster: the nodes name the cluster"),
        (TOPIC_LAYOUT + "[redis]\nmode = cluster\nnodes = a:1\nmaster_name = m\n",
         ":7: [redis] master_name: not used with mode = cluster: the nodes name the cluster"),
        (TOPIC_LAYOUT + "[redis]\nmode = cluster\nnodes = a:1,b\n", ':6: [redis] nodes: "b" is not host:port'),
        (TOPIC_LAYOUT + "[redis]\nmode = cluster\nnodes = a:1\ndatabase = 3\n",
         ":7: [redis] database: Redis Cluster has only database 0"),
        # the server's order: database before nodes, nodes before the layout
        ("[redis]\nmode = cluster\ndatabase = 1\n", ":3: [redis] database: Redis Cluster has only database 0"),
        ("[redis]\nmode = cluster\ntls = maybe\nnodes = a:1\n", ':3: [redis] tls: "maybe" is not yes or no'),
        ("[redis]\nmode = cluster\nnodes = a:1\n",
         ":2: [redis] mode: mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)"),
        ("[delayer]\nlayout = classic\n[redis]\nmode = cluster\nnodes = a:1\n",
         ":4: [redis] mode: mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)"),
        ("[redis]\nmode = clustre\n", ':2: [redis] mode: "clustre" is not a mode: standalone, sentinel or cluster'),
    ],
)
def test_bad_cluster_settings_are_refused_naming_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        Delayer.from_config(path)
    assert str(e.value) == f"{path}{message}"


def test_cluster_settings_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, TOPIC_LAYOUT + "[redis]\nmode = cluster\nnodes = 127.0.0.1:7000, [::1]:7001\n"
                           "database = 0\npassword = s3cret\ntls = no\n")
    s = delayer.config.load(path)
    assert s.cluster == (("127.0.0.1", 7000), ("::1", 7001)) and s.sentinels == () and not s.tls
    assert "s3cret" not in repr(s)


def test_constructor_options_go_together() -> None:
    for bad in (
        dict(url="redis://127.0.0.1:1/0"),
        dict(sentinels="127.0.0.1:1"),
        dict(master_name="m"),
        dict(database=1),
        dict(layout="classic"),
    ):
        with pytest.raises(InvalidArgument):
            Delayer(cluster="127.0.0.1:1", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="cluster: 'nope' is not host:port"):
        Delayer(cluster="nope")
    with pytest.raises(InvalidArgument, match="at least one seed node"):
        Delayer(cluster=[])


def test_an_unreachable_cluster_is_a_connection_error_without_the_password() -> None:
    port = kit.cluster_port()  # nothing listens there
    with pytest.raises(ConnectionFailed) as e:
        Delayer(cluster=f"127.0.0.1:{port}", password="hunter2-secret")
    assert f"127.0.0.1:{port}" in str(e.value) and "hunter2-secret" not in str(e.value)

    async def body() -> None:
        client = delayer_aio.Delayer(cluster=[("127.0.0.1", port)], password="hunter2-secret")
        try:
            with pytest.raises(ConnectionFailed) as e:
                await client.push("t", "1", 0)
            assert "hunter2-secret" not in str(e.value)
        finally:
            await client.close()

    run(body)


# -- on a real cluster -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[kit.Cluster]:
    """Three masters with a replica each, with a password; no master is killed here."""
    c = kit.Cluster(password=PASSWORD)
    try:
        yield c
    finally:
        c.stop()


def spread_topics(c: kit.Cluster, tag: str, per_master: int = 1) -> List[str]:
    """Topics whose keys live on every master, ``per_master`` on each (checked
    with CLUSTER KEYSLOT and the cluster's own slot table)."""
    masters = c.masters()
    assert len(masters) == 3
    found: Dict[int, List[str]] = {m: [] for m in masters}
    n = 0
    while any(len(v) < per_master for v in found.values()):
        topic = f"{tag}-{n}"
        n += 1
        owner = c.master_for(key(PREFIX, topic, "pool"))
        if len(found[owner]) < per_master:
            found[owner].append(topic)
    return [t for m in masters for t in found[m]]


def config(tmp_path: Path, c: kit.Cluster) -> Path:
    return write(tmp_path, TOPIC_LAYOUT + c.redis_section())


def index_of(raw: Any) -> Dict[str, float]:
    return {t: float(s) for t, s in raw.zrange(PREFIX + "due", 0, -1, withscores=True)}


def test_every_operation_on_topics_of_every_master(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()
    client = Delayer.from_config(config(tmp_path, cluster))
    # a cluster passes a PUBLISH to every node: listen on another master than the one sent to
    wake = WakeListener(redis.Redis(host="127.0.0.1", port=cluster.masters()[1], password=PASSWORD))
    try:
        assert client.keys.layout == "topic" and PASSWORD not in repr(client)
        assert "the cluster of 127.0.0.1:" in repr(client)
        topics = spread_topics(cluster, "sync")
        for t in topics:
            due = client.push(t, "a", 0, b"body-a")
            assert due > 0
            assert raw.zscore(key(PREFIX, t, "pool"), "a") == pytest.approx(due, abs=0.001)
        assert not index_of(raw)  # the server's index: no SDK writes it
        assert wake.next() is not None  # the first push's announcement, from its topic's master
        for t in topics:
            client.push(t, "b", 0, b"body-b")
            assert move_until(raw, t, 2) == 2
            assert client.list_ready(t).items == ["a", "b"]
            assert client.job(t, "a").state == "ready"
            got = client.pop(t)
            assert got is not None and (got.id, got.body) == ("a", b"body-a")
            held = client.reserve(t, ttr=60)
            assert held is not None and held.id == "b"
            assert client.list_reserved(t).items[0].id == "b"
            assert client.touch(held, 120) is not None
            assert client.release(held, delay=0) is True
            assert move_until(raw, t, 1) == 1
            again = client.breserve(t, ttr=60, timeout=5)
            assert again is not None and again.id == "b"
            assert client.bury(again, error="no good") is True
            assert [d.id for d in client.dead_letters(t)] == ["b"]
            assert client.requeue_dead(t) == 1
            assert move_until(raw, t, 1) == 1
            got = client.bpop(t, 5)
            assert got is not None and got.id == "b"
            client.push(t, "c", 300)
            assert client.list_scheduled(t).items[0].id == "c"
            assert client.reschedule("c", 600, topic=t) is not None
            assert client.remove("c", topic=t) is True
            client.push(t, "d", 0)
            assert move_until(raw, t, 1) == 1
            held = client.reserve(t, 60)
            assert held is not None
            assert client.ack("d", held.receipt, topic=t) is True
            client.push(t, "e", 0)
            assert move_until(raw, t, 1) == 1
            bury_me = client.reserve(t, 60)
            assert bury_me is not None and client.bury(bury_me) is True
            assert client.purge_dead(t) == 1
        raw.sadd(PREFIX + "topics", *topics)  # the server's part: it indexes every announced topic
        stats = client.stats()
        assert {s.topic for s in stats.topics} >= set(topics)
        assert all(s.scheduled == s.ready == s.dead == 0 for s in stats.topics if s.topic in topics)
    finally:
        wake.close()
        client.close()
        raw.close()


def test_push_many_and_reserve_many_over_many_topics(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()
    client = Delayer.from_config(config(tmp_path, cluster))
    try:
        topics = spread_topics(cluster, "many", per_master=10)
        jobs = [Job(t, f"id-{k}", 0, f"{t}/{k}".encode()) for t in topics for k in range(25)]
        dues = client.push_many(jobs)
        assert len(dues) == len(jobs) and all(d > 0 for d in dues)
        assert not index_of(raw)  # the server's index: no SDK writes it
        with pytest.raises(delayer.IdTakenError) as taken:
            client.push_many(jobs[:3] + [Job(topics[1], "fresh", 0)], if_absent=True)
        assert len(taken.value.taken) == 3 and taken.value.due[3] is not None
        raw.sadd(PREFIX + "topics", *topics)  # as the server records the topics announced
        stats = {s.topic: s for s in client.stats().topics}
        assert all(stats[t].scheduled == (26 if t == topics[1] else 25) for t in topics)
        first, other = topics[0], topics[-1]  # on different masters
        assert cluster.master_for(key(PREFIX, first, "pool")) != cluster.master_for(key(PREFIX, other, "pool"))
        move_until(raw, first, 25)
        move_until(raw, other, 25)
        acked, held = client.reserve_many(first, 60, 10)
        assert acked == [] and len(held) == 10
        other_held = client.reserve(other, 60)
        assert other_held is not None
        # Acks of another topic (another master) go in the same round trip as a call of their own.
        acked, more = client.reserve_many(first, 60, 5, acks=held + [other_held])
        assert acked == [True] * 11 and len(more) == 5
        assert client.stats().reserved_total >= 5
    finally:
        client.close()
        raw.close()


def test_an_acl_user_without_the_wake_channel_still_pushes(tmp_path: Path, cluster: kit.Cluster) -> None:
    """username + password on every node; a user who may not PUBLISH on the
    wake channel still pushes (the server's rescan and sweep find the job), and
    a wrong password is AuthenticationFailed without the password."""
    for port in cluster.ports:  # ACL users are per node
        with cluster.node(port) as r:
            r.execute_command("ACL", "SETUSER", "pusher", "on", ">pusher-pw", "~delayer:*", "resetchannels",
                              "+@all")
    with redis.Redis(host="127.0.0.1", port=cluster.masters()[0], username="pusher", password="pusher-pw") as r:
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.publish(PREFIX + "wake", "1")  # what the pushes below are refused
    raw = cluster.client()
    section = f"[redis]\nmode = cluster\nnodes = {cluster.seeds}\nusername = pusher\npassword = pusher-pw\n"
    path = write(tmp_path, TOPIC_LAYOUT + section)
    client = Delayer.from_config(path)
    try:
        topics = spread_topics(cluster, "acl")
        for t in topics:
            assert client.push(t, "x", 30) > 0
        assert len(client.push_many([Job(t, "y", 20) for t in topics])) == 3
        assert all(raw.zscore(key(PREFIX, t, "pool"), "y") is not None for t in topics)

        async def body() -> None:
            aclient = delayer_aio.Delayer.from_config(path)
            try:
                assert await aclient.push(topics[0], "z", 10) > 0
            finally:
                await aclient.close()

        run(body)
        with pytest.raises(delayer.AuthenticationFailed) as e:
            Delayer(cluster=cluster.seeds, username="pusher", password="wrong-pw")
        assert "wrong-pw" not in str(e.value)
    finally:
        client.close()
        raw.close()


def move_one_slot(c: kit.Cluster, source: int, target: int) -> int:
    """Reshard one slot (with its keys) from master ``source`` to ``target``
    with ``redis-cli --cluster reshard``; return the slot, once every node
    sees ``target`` own it."""
    view = {n.port: n for n in c.topology()}
    before = {s for lo, hi in view[source].slots for s in range(lo, hi + 1)}
    env = dict(os.environ, REDISCLI_AUTH=PASSWORD)
    done = subprocess.run(
        ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{source}", "--cluster-from", view[source].id,
         "--cluster-to", view[target].id, "--cluster-slots", "1", "--cluster-yes"],
        stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=WITHIN,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    deadline = time.monotonic() + WITHIN
    while True:
        moved = [s for s in before if all(n.owns(s) for n in c.topology() if n.port == target)]
        if moved and all(
            any(n.port == target and n.owns(moved[0]) for n in kit.parse_nodes(c._ask(p, "CLUSTER", "NODES")))
            for p in c.masters()
        ):
            return moved[0]
        assert time.monotonic() < deadline, "the slot did not move"
        time.sleep(0.05)


def topic_in_slot(slot: int, tag: str) -> str:
    """A topic whose keys hash to ``slot`` (the topic is the hash tag)."""
    n = 0
    while key_slot(f"{tag}-{n}".encode()) != slot:
        n += 1
    return f"{tag}-{n}"


def test_calls_follow_a_slot_moved_to_another_master(tmp_path: Path, cluster: kit.Cluster) -> None:
    """Clients whose slot table is stale (made before a resharding) send a
    topic's calls to the old master: script calls, pipelines and durable
    pushes (which go on plain node connections) all end up on the new one."""
    raw = cluster.client()
    path = config(tmp_path, cluster)
    client = Delayer.from_config(path)  # reads the slot table now
    durable_client = Delayer.from_config(path)

    async def body() -> Tuple[str, int]:
        aclient = delayer_aio.Delayer.from_config(path)
        try:
            await aclient.stats()  # reads the slot table
            source, target = cluster.masters()[0], cluster.masters()[2]
            slot = await asyncio.get_running_loop().run_in_executor(None, move_one_slot, cluster, source, target)
            topic = topic_in_slot(slot, "moved")
            assert cluster.master_for(key(PREFIX, topic, "pool")) == target
            assert durable_client.push(topic, "durable", 300, durable=True) > 0
            assert await aclient.push(topic, "aio-durable", 300, durable=True) > 0
            assert client.push(topic, "plain", 300) > 0
            assert len(client.push_many([Job(topic, "many", 300), Job(topic + "x", "many", 300)])) == 2
            assert len(await aclient.push_many([Job(topic, "aio-many", 300)])) == 1
            return topic, target
        finally:
            await aclient.close()

    try:
        topic, target = run(body)
        with cluster.node(target) as on_target:  # not cluster-aware: the keys are on the new master
            assert set(on_target.zrange(key(PREFIX, topic, "pool"), 0, -1)) == {
                "durable", "aio-durable", "plain", "many", "aio-many"}
    finally:
        client.close()
        durable_client.close()
        raw.close()


def flush_scripts(c: kit.Cluster) -> None:
    for port in c.masters():
        with c.node(port) as r:
            r.script_flush()


def test_calls_load_their_scripts_again_after_a_script_flush(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()
    client = Delayer.from_config(config(tmp_path, cluster))
    try:
        topics = spread_topics(cluster, "noscript")
        client.push(topics[0], "warm", 0)
        flush_scripts(cluster)
        assert client.push(topics[1], "one", 0) > 0
        flush_scripts(cluster)
        dues = client.push_many([Job(t, "many", 0) for t in topics])
        assert len(dues) == 3
        for t in topics:
            assert raw.zscore(key(PREFIX, t, "pool"), "many") is not None
    finally:
        client.close()
        raw.close()


def test_a_wait_outlasts_the_clients_read_timeout(tmp_path: Path, cluster: kit.Cluster) -> None:
    """redis-py 8's RedisCluster reads with a 5 s timeout: a 7 s bpop and
    breserve must wait it out on the waits' own connections."""
    client = Delayer.from_config(config(tmp_path, cluster))
    try:
        topic = spread_topics(cluster, "wait")[2]
        began = time.monotonic()
        assert client.bpop(topic, 7) is None
        assert client.breserve(topic, 60, 7) is None
        assert time.monotonic() - began >= 14
    finally:
        client.close()


def test_durable_pushes_wait_for_a_replica_of_every_master_written(tmp_path: Path, cluster: kit.Cluster) -> None:
    """durable=: each master a call wrote to waits for its replica (WAIT 1 on
    that write's connection); a replica that does not answer is
    NotReplicatedError, with the due times."""
    raw = cluster.client()
    path = config(tmp_path, cluster)
    client = Delayer.from_config(path)
    topics = spread_topics(cluster, "durable", per_master=2)
    try:
        assert client.push(topics[0], "one", 0, durable=True) > 0
        dues = client.push_many([Job(t, f"d{k}", 0) for t in topics for k in range(30)], durable=5)
        assert len(dues) == 180 and all(d > 0 for d in dues)
        for t in topics:
            assert raw.zcard(key(PREFIX, t, "pool")) >= 30
        # A topic that is not UTF-8 (a Latin-1 "é"): its WAIT goes to the master of its key's bytes.
        assert client.push("caf\udce9", "odd", 0, durable=True) > 0
        assert raw.zscore(PREFIX.encode() + b"{caf\xe9}:pool", "odd") is not None
        # A replica that stops acknowledging: its master's pushes are not replicated in time.
        victim = topics[-1]
        replica = cluster.replica_of(cluster.master_for(key(PREFIX, victim, "pool")))
        assert replica is not None
        paused = cluster.pids[replica]
        os.kill(paused, signal.SIGSTOP)
        try:
            with pytest.raises(delayer.NotReplicatedError) as e:
                client.push(victim, "lonely", 0, durable=0.3)
            assert e.value.due is not None and e.value.due > 0

            async def body() -> None:
                aclient = delayer_aio.Delayer.from_config(path)
                try:
                    assert await aclient.push(topics[0], "aio", 0, durable=True) > 0
                    with pytest.raises(delayer.NotReplicatedError):
                        await aclient.push_many([Job(t, "aio-many", 0) for t in topics], durable=0.3)
                finally:
                    await aclient.close()

            run(body)
        finally:
            os.kill(paused, signal.SIGCONT)
        assert raw.zscore(key(PREFIX, victim, "pool"), "lonely") is not None  # written, just not replicated
    finally:
        client.close()
        raw.close()


def test_the_asyncio_client_on_topics_of_every_master(tmp_path: Path, cluster: kit.Cluster) -> None:
    raw = cluster.client()
    path = config(tmp_path, cluster)

    async def body() -> None:
        client = delayer_aio.Delayer.from_config(path)
        try:
            topics = spread_topics(cluster, "aio", per_master=2)
            dues = await client.push_many([Job(t, f"j{k}", 0, b"x") for t in topics for k in range(3)])
            assert len(dues) == 18
            assert not index_of(raw)  # the server's index: no SDK writes it
            for t in topics:
                assert await client.push(t, "solo", 0) > 0
                move_until(raw, t, 4)
                got = await client.bpop(t, 5)
                assert got is not None and got.id == "j0"
                assert (await client.pop(t)).id == "j1"  # type: ignore[union-attr]
                held = await client.breserve(t, 60, 5)
                assert held is not None and held.id == "j2"
                assert await client.release(held, delay=0) is True
                move_until(raw, t, 1)
                acked, jobs = await client.reserve_many(t, 60, 5)
                assert {j.id for j in jobs} == {"solo", "j2"}
                acked, _ = await client.reserve_many(t, 60, 0, acks=jobs)
                assert acked == [True, True]
                assert (await client.job(t, "j2")).state == "unknown"
            raw.sadd(PREFIX + "topics", *topics)  # the server's part: it indexes every announced topic
            stats = await client.stats()
            assert {s.topic for s in stats.topics} >= set(topics)
            flush_scripts(cluster)
            assert await client.push(topics[0], "after-flush", 0) > 0
            assert len(await client.push_many([Job(t, "after-flush-many", 0) for t in topics])) == len(topics)
            began = time.monotonic()
            assert await client.bpop(topics[1] + "-idle", 6) is None
            assert time.monotonic() - began >= 6
        finally:
            await client.close()

    try:
        run(body)
    finally:
        raw.close()


class Server:
    """The server's moves for every topic of ``<prefix>topics`` or announced
    on ``<prefix>wake``, on a thread, through a RedisCluster (so it follows a
    failover as the real server does). A cluster passes a script's PUBLISH to
    every node; this stand-in listens on every master, so a killed one leaves
    others to hear (the real server re-subscribes and rescans instead)."""

    def __init__(self, c: kit.Cluster) -> None:
        self.raw = c.client(socket_timeout=5)
        self.announced: Set[str] = set()
        # The nodes' clients are kept: a collected redis.Redis closes its pool, and so the subscription.
        self.nodes = [redis.Redis(host="127.0.0.1", port=p, password=PASSWORD, decode_responses=True, socket_timeout=5)
                      for p in c.masters()]
        self.subscriptions = [n.pubsub() for n in self.nodes]
        for sub in self.subscriptions:
            sub.subscribe(PREFIX + "wake")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _hear(self) -> None:
        for sub in self.subscriptions:
            try:
                while (m := sub.get_message(timeout=0)) is not None:
                    if m["type"] == "message" and " " in m["data"]:
                        self.announced.add(m["data"].split(" ", 1)[1])
            except redis.RedisError:
                pass  # a killed master: the others hear the same messages

    def _loop(self) -> None:
        from topickit import move_topic

        indexed: Set[str] = set()
        while not self.done.is_set():
            self._hear()
            try:
                for t in self.announced - indexed:
                    self.raw.sadd(PREFIX + "topics", t)  # as the server indexes an announced topic
                    indexed.add(t)
                for t in self.raw.smembers(PREFIX + "topics") | self.announced:
                    move_topic(self.raw, t)
            except (redis.RedisError, redis.exceptions.RedisClusterException):
                pass
            self.done.wait(0.02)

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=30)
        for sub, node in zip(self.subscriptions, self.nodes):
            sub.close()
            node.close()
        self.raw.close()


def test_both_workers_serve_topics_of_every_master(tmp_path: Path, cluster: kit.Cluster) -> None:
    path = config(tmp_path, cluster)
    topics = spread_topics(cluster, "worker")
    server = Server(cluster)
    client = Delayer.from_config(path)
    try:
        seen: List[str] = []
        lock = threading.Lock()
        worker = Worker(client, concurrency=4, ttr=30, grace=5)

        def handle(job: delayer.Delivery) -> None:
            with lock:
                seen.append(f"{job.topic}/{job.id}")

        for t in topics:
            worker.handle(t, handle)
        runner = threading.Thread(target=lambda: worker.run(signals=False), daemon=True)
        runner.start()
        client.push_many([Job(t, f"w{k}", 0) for t in topics for k in range(5)])
        wanted = {f"{t}/w{k}" for t in topics for k in range(5)}
        deadline = time.monotonic() + WITHIN
        while not wanted <= set(seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.stop()
        runner.join(timeout=WITHIN)
        assert wanted <= set(seen), sorted(wanted - set(seen))
        stats = {s.topic: s for s in client.stats().topics}
        assert all(stats[t].reserved == 0 and stats[t].ready == 0 for t in topics)

        async def async_worker() -> List[str]:
            aclient = delayer_aio.Delayer.from_config(path)
            got: List[str] = []
            try:
                w = delayer_aio.Worker(aclient, concurrency=4, ttr=30, grace=5)

                async def ahandle(job: delayer_aio.Delivery) -> None:
                    got.append(f"{job.topic}/{job.id}")

                for t in topics:
                    w.handle(t, ahandle)
                task = asyncio.ensure_future(w.run(signals=False))
                await aclient.push_many([Job(t, f"a{k}", 0) for t in topics for k in range(5)])
                end = time.monotonic() + WITHIN
                want = {f"{t}/a{k}" for t in topics for k in range(5)}
                while not want <= set(got) and time.monotonic() < end:
                    await asyncio.sleep(0.05)
                w.stop()
                await asyncio.wait_for(task, WITHIN)
                assert want <= set(got), sorted(want - set(got))
            finally:
                await aclient.close()
            return got

        assert len(run(async_worker)) >= 15
    finally:
        client.close()
        server.close()


# -- a failover ------------------------------------------------------------------------------------


def eventually(what: str, f: Callable[[], Optional[T]]) -> T:
    """``f()`` until it gives something; the connection errors of a failover
    under way are allowed, any other error is not."""
    deadline = time.monotonic() + WITHIN
    last: Any = None
    while time.monotonic() < deadline:
        try:
            got = f()
            if got is not None:
                return got
        except ConnectionFailed as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"{what}: never happened; last error: {last!r}")


async def aeventually(what: str, f: Callable[[], Awaitable[Optional[T]]]) -> T:
    deadline = time.monotonic() + WITHIN
    last: Any = None
    while time.monotonic() < deadline:
        try:
            got = await f()
            if got is not None:
                return got
        except ConnectionFailed as e:
            last = e
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: never happened; last error: {last!r}")


def test_calls_work_again_after_a_master_is_killed(tmp_path: Path) -> None:
    """kill -9 of the master of a topic's slot while a worker runs: once its
    replica took over, every kind of call (script, pipeline of scripts,
    index write, stats, a wait) works again, sync and asyncio, without a
    new client."""
    c = kit.Cluster(password=PASSWORD)
    server: Optional[Server] = None
    try:
        path = config(tmp_path, c)
        topics = spread_topics(c, "failover")
        victim = topics[0]
        client = Delayer.from_config(path)
        server = Server(c)
        seen: List[str] = []
        worker = Worker(client, concurrency=2, ttr=30, grace=5)
        for t in topics:
            worker.handle(t, lambda job: seen.append(f"{job.topic}/{job.id}"))
        runner = threading.Thread(target=lambda: worker.run(signals=False), daemon=True)
        runner.start()

        async def body() -> None:
            aclient = delayer_aio.Delayer.from_config(path)
            try:
                await aclient.push(victim, "before-aio", 300)
                client.push_many([Job(t, "before", 0) for t in topics])
                eventually("the worker's jobs before", lambda: {f"{t}/before" for t in topics} <= set(seen) or None)
                old, new = await asyncio.get_running_loop().run_in_executor(
                    None, c.kill_master, key(PREFIX, victim, "pool")
                )
                assert old != new and c.master_for(key(PREFIX, victim, "pool")) == new
                eventually("push", lambda: client.push(victim, "after", 0) or None)
                eventually("push_many", lambda: client.push_many([Job(t, "after-many", 0) for t in topics]) or None)
                eventually("the worker's jobs after",
                           lambda: {f"{t}/after-many" for t in topics} | {f"{victim}/after"} <= set(seen) or None)
                eventually("stats", lambda: client.stats())
                assert await aeventually("async push", lambda: aclient.push(victim, "after-aio", 0)) > 0
                await aeventually("async push_many",
                                  lambda: aclient.push_many([Job(t, "after-aio-many", 300) for t in topics]))
                await aeventually("async reschedule", lambda: aclient.reschedule("after-aio-many", 0, topic=victim))
                await aeventually("async stats", lambda: aclient.stats())
            finally:
                await aclient.close()

        try:
            run(body)
        finally:
            worker.stop()
            runner.join(timeout=WITHIN)
            client.close()
    finally:
        if server is not None:
            server.close()
        c.stop()


# -- TLS -------------------------------------------------------------------------------------------


class TlsCluster:
    """Three masters speaking TLS only (clients and cluster bus), no
    replicas, joined by hand (CLUSTER ADDSLOTSRANGE / MEET): enough to see
    ``tls = yes`` and ``tls_ca_file`` reach every node, the waits' client
    and the nodes' own included."""

    def __init__(self, certs: Tuple[Path, Path, Path]) -> None:
        import shutil
        import tempfile

        cert, key_file, self.ca = certs
        self.dir = Path(tempfile.mkdtemp(prefix="delayer-tls-cluster-"))
        self.procs: List["subprocess.Popen[bytes]"] = []
        self.ports: List[int] = []
        self._rm = lambda: shutil.rmtree(self.dir, ignore_errors=True)
        try:
            for _ in range(3):
                port = kit.cluster_port()  # its bus port (+10000) is free too
                self.procs.append(subprocess.Popen(
                    ["redis-server", "--port", "0", "--tls-port", str(port), "--tls-cluster", "yes",
                     "--tls-cert-file", str(cert), "--tls-key-file", str(key_file), "--tls-ca-cert-file", str(self.ca),
                     "--tls-auth-clients", "no", "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                     "--cluster-config-file", f"nodes-{port}.conf", "--dir", str(self.dir), "--save", "",
                     "--appendonly", "no", "--logfile", f"node-{port}.log"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                self.ports.append(port)
            self._until("every node answers", lambda: all(self.node(p).ping() for p in self.ports))
            third = kit.SLOTS // 3
            for k, port in enumerate(self.ports):
                hi = kit.SLOTS - 1 if k == 2 else (k + 1) * third - 1
                self.node(port).execute_command("CLUSTER", "ADDSLOTSRANGE", k * third, hi)
            for port in self.ports[1:]:
                self.node(self.ports[0]).execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            self._until("cluster_state:ok on every node", lambda: all(
                "cluster_state:ok" in str(self.node(p).execute_command("CLUSTER", "INFO"))
                and "cluster_known_nodes:3" in str(self.node(p).execute_command("CLUSTER", "INFO"))
                for p in self.ports))
        except BaseException:
            self.stop()
            raise

    def node(self, port: int) -> "redis.Redis":
        return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(self.ca), decode_responses=True,
                           socket_timeout=5)

    def _until(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WITHIN
        while True:
            try:
                if check():
                    return
            except (redis.RedisError, OSError):
                pass
            assert time.monotonic() < deadline, f"TLS cluster: no {what} within {WITHIN} s"
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self._rm()


def test_tls_reaches_every_node(tmp_path: Path, certs: Tuple[Path, Path, Path]) -> None:
    c = TlsCluster(certs)
    try:
        seeds = ",".join(f"127.0.0.1:{p}" for p in c.ports)
        path = write(tmp_path, TOPIC_LAYOUT + f"[redis]\nmode = cluster\nnodes = {seeds}\ntls = yes\n"
                                              f"tls_ca_file = {c.ca}\n")
        by_master: Dict[int, str] = {}  # a topic on each master (the slot thirds given above)
        n = 0
        while len(by_master) < 3:
            by_master.setdefault(min(key_slot(f"tls-{n}".encode()) // (kit.SLOTS // 3), 2), f"tls-{n}")
            n += 1
        topics = list(by_master.values())
        client = Delayer.from_config(path)
        try:
            assert len(client.push_many([Job(t, "a", 0) for t in topics])) == 3
            assert client.push(topics[0], "b", 0) > 0
            client.redis.sadd(PREFIX + "topics", *topics)  # as the server records the topics announced
            assert {s.topic for s in client.stats().topics} == set(topics)
            assert client.bpop(topics[1] + "-empty", 0.2) is None  # the waits' client speaks TLS too
            with pytest.raises(delayer.NotReplicatedError):  # the nodes' own clients too (no replica here)
                client.push(topics[2], "c", 0, durable=0.1)
        finally:
            client.close()

        async def body() -> None:
            aclient = delayer_aio.Delayer.from_config(path)
            try:
                assert await aclient.push(topics[1], "aio", 0) > 0
                assert len((await aclient.stats()).topics) == 3
                assert await aclient.bpop(topics[1] + "-empty", 0.2) is None
            finally:
                await aclient.close()

        run(body)
        with pytest.raises(ConnectionFailed):  # no tls = yes: a plain-text hello to a TLS port
            Delayer(cluster=seeds)
    finally:
        c.stop()
