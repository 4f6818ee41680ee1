"""Same-run cost of the outcome counters (one HINCRBY in ack.lua and
release.lua) and of the due field (one more field in the per-topic layout's
push): old (main) and new scripts alternate pipeline by pipeline over the
same kind of data on one redis-server; Redis's time for each is read from
INFO commandstats (evalsha usec) around it, so the setup writes (HSET, ZADD)
are not counted; per script, the median and lower quartile of microseconds
per call. Method as bench/guard_cost.py.

    N=200000 taskset -c 1 .venv/bin/python bench/outcome_cost.py /work/main/lua lua
"""
import os, statistics, subprocess, sys, time, socket
import redis
from scriptcost import evalsha_usec, load, sdk_keys, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "200000"))
BATCH = 500


srv, r = start_redis()
shas = load(r, OLD, NEW, ("ack.lua", "release.lua", "push.lua", "reserve.lua"))


def usec():
    return evalsha_usec(r)


def summary(name, per):
    out = []
    for v in ("old", "new"):
        xs = sorted(per[v]); out.append((statistics.median(xs), xs[len(xs) // 4]))
    (om, oq), (nm, nq) = out
    print(f"{name:8} old median {om:.3f} q1 {oq:.3f} | new median {nm:.3f} q1 {nq:.3f} us/call | "
          f"new/old median {nm / om:.3f} q1 {nq / oq:.3f} ({len(per['old'])}+{len(per['new'])} samples)")


def reserved_batch(k):
    """BATCH reserved jobs of topic "t" (bucket with receipt, in the reserved set): their ids."""
    p = r.pipeline(transaction=False)
    ids = [f"j{k}-{i}" for i in range(BATCH)]
    for i in ids:
        p.hset(f"d:job_bucket:{i}", mapping={"topic": "t", "body": "", "receipt": "1", "attempts": "1",
                                              "max_attempts": "25", "backoff": "fixed", "backoff_ms": "1000",
                                              "backoff_max_ms": "1000"})
        p.zadd("d:reserved", {i: 1})
    p.execute()
    return ids


def run(name, call):
    per = {"old": [], "new": []}
    for k in range(N // BATCH):
        v = ("old", "new")[k % 2]
        ids = reserved_batch(k)
        p = r.pipeline(transaction=False)
        for i in ids:
            call(p, v, i)
        before = usec(); p.execute(); per[v].append((usec() - before) / BATCH)
        r.delete("d:job_pool", "d:scheduled_count")
        if k % 40 == 39: r.flushall()
    summary(name, per)


# ack: KEYS reserved, bucket, pool (+ outcomes, new)
run("ack", lambda p, v, i: p.evalsha(shas[(v, "ack.lua")], *(
    (4, "d:reserved", f"d:job_bucket:{i}", "d:job_pool", "d:outcomes") if v == "new"
    else (3, "d:reserved", f"d:job_bucket:{i}", "d:job_pool")), i, "1"))
# release (held, a retry after 60 s): KEYS reserved, pool, malformed, counts (+ outcomes, new)
run("release", lambda p, v, i: p.evalsha(shas[(v, "release.lua")], *(
    (5, "d:reserved", "d:job_pool", "d:malformed", "d:scheduled_count", "d:outcomes") if v == "new"
    else (4, "d:reserved", "d:job_pool", "d:malformed", "d:scheduled_count")),
    "d:job_bucket:", "d:dead:", "60000", "held", i, "1", "d:wake", "E: boom"))
# reserve_many's acks (a Worker's path): calls acking 100 jobs each (n = 0), counted per batch
def batch_acks(p, v, ids):
    keys = sdk_keys("reserve", "d:")  # ..., outcomes, flow, gate; the old script took the first five
    keys = keys if v == "new" else keys[:5]
    for c in range(0, len(ids), 100):
        pairs = [x for i in ids[c:c + 100] for x in (i, "1")]
        p.evalsha(shas[(v, "reserve.lua")], len(keys), *keys, "d:job_bucket:", 30000, 0, *pairs)


per = {"old": [], "new": []}
for k in range(N // BATCH):
    v = ("old", "new")[k % 2]
    ids = reserved_batch(k)
    p = r.pipeline(transaction=False)
    batch_acks(p, v, ids)
    before = usec(); p.execute(); per[v].append((usec() - before) / BATCH)
    if k % 40 == 39: r.flushall()
summary("acks/job", per)
# push in the per-topic layout (no scheduled counts: the new script writes the due field)
per = {"old": [], "new": []}
for k in range(N // BATCH):
    v = ("old", "new")[k % 2]
    p = r.pipeline(transaction=False)
    for i in range(BATCH):
        p.evalsha(shas[(v, "push.lua")], 2, "d:{t}:pool", f"d:{{t}}:job:p{k}-{i}", f"p{k}-{i}", "t", "body",
                  "60000", "604800000", "", "", "", "", "replace", "")
    before = usec(); p.execute(); per[v].append((usec() - before) / BATCH)
    if k % 40 == 39: r.flushall()
summary("push", per)
srv.terminate()
