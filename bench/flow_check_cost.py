"""What flow control's check costs the calls that pay it on every job (issue
23, slices 1 and 2): pop.lua and one-job reserve.lua (one HGET of the
topic's flow hash per call) and the per-topic drain, move_topic.lua (one
HMGET per batch), old copies beside new in the same run. Redis's own time in
EVALSHA (INFO commandstats) per job; calls alternate old and new, each from
the same kind of data, on a topic that is not paused (the common case).

    mkdir -p /tmp/oldlua && git archive 704c1a9 lua | tar -x -C /tmp/oldlua --strip-components=1
    N=100000 nice -n -10 .venv/bin/python bench/flow_check_cost.py /tmp/oldlua lua
"""
import os, statistics, sys, time
from scriptcost import evalsha_usec, load, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "100000"))
P = "delayer:"
srv, r = start_redis()
shas = load(r, OLD, NEW, ("pop.lua", "reserve.lua", "move_topic.lua"))
KEYS = {
    # A script reads only the keys its header names: extra ones are ignored by the old copies.
    "pop.lua": [P + "ready_queue:t", P + "malformed", P + "job_pool", P + "reserved", P + "flow:t",
                P + "flow_gate:t"],
    "reserve.lua": [P + "ready_queue:t", P + "reserved", P + "malformed", P + "receipt_seq", P + "job_pool",
                    P + "outcomes", P + "flow:t", P + "flow_gate:t"],
}


def fill(n):
    """n ready jobs of topic t, as the server leaves them."""
    r.flushall()
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.hset(f"{P}job_bucket:j{i}", mapping={"topic": "t", "body": "x"})
        p.lpush(P + "ready_queue:t", f"j{i}")
        if i % 5000 == 4999:
            p.execute()
    p.execute()


def per_job(calls):
    """Redis µs per call of `calls` (a list of (sha, keys, args)), pipelined 100 at a time."""
    before = evalsha_usec(r)
    for k in range(0, len(calls), 100):
        p = r.pipeline(transaction=False)
        for sha, keys, args in calls[k:k + 100]:
            p.evalsha(sha, len(keys), *keys, *args)
        p.execute()
    return (evalsha_usec(r) - before) / len(calls)


results = {}
for script, args in (("pop.lua", [P + "job_bucket:"]), ("reserve.lua", [P + "job_bucket:", 30000, "", P + "wake"])):
    per = {"old": [], "new": []}
    for rnd in range(6):
        fill(N // 6)
        order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
        half = N // 12
        for v in order:
            per[v].append(per_job([(shas[(v, script)], KEYS[script], args)] * half))
    results[script] = per

# move_topic.lua: 10 topics' pools of due ids, batches of 1000, alternating.
per = {"old": [], "new": []}
r.flushall()
now = time.time()
p = r.pipeline(transaction=False)
for i in range(N * 4):
    p.zadd(f"{P}{{d{i % 10}}}:pool", {f"j{i}": now - 100 + i / N})
    if i % 5000 == 4999:
        p.execute()
p.execute()
k = 0
for t in range(10):
    ks = [f"{P}{{d{t}}}:{kind}" for kind in ("pool", "ready", "reserved", "flow")]
    while r.zcard(ks[0]) >= 1000:
        v = ("old", "new")[k % 2]
        k += 1
        before = evalsha_usec(r)
        n = r.evalsha(shas[(v, "move_topic.lua")], 4, *ks, 1000)[0]
        per[v].append((evalsha_usec(r) - before) / n)
results["move_topic.lua"] = per

for script, per in results.items():
    old, new = statistics.median(per["old"]), statistics.median(per["new"])
    print(f"{script:15} old {old:7.3f} us/job  new {new:7.3f} us/job  new/old {new / old:.3f}"
          f"  ({len(per['old'])}+{len(per['new'])} samples)")
srv.terminate()
