"""Same-run cost of the guards, robust to a busy machine: old (main) and
new scripts alternate call by call (move, move_topic) or pipeline by
pipeline (push) over the same kind of data on one redis-server; Redis's
time for each is read from INFO commandstats (evalsha usec) around it;
per script, the median and the lower quartile of microseconds per job.

    mkdir -p /tmp/oldlua && git archive 30b6126 lua | tar -x -C /tmp/oldlua --strip-components=1
    N=400000 taskset -c 1 .venv/bin/python bench/guard_cost.py /tmp/oldlua lua
"""
import os, statistics, subprocess, sys, time, socket
import redis
from scriptcost import evalsha_usec, load, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "400000"))
TOPICS = int(os.environ.get("TOPICS", "10"))

srv, r = start_redis()
shas = load(r, OLD, NEW, ("move.lua", "move_topic.lua", "push.lua"))

def usec():
    return evalsha_usec(r)

def timed(f):
    before = usec(); n = f(); return (usec() - before) / n if n else None

def summary(name, per):
    out = []
    for v in ("old", "new"):
        xs = sorted(per[v]); out.append((statistics.median(xs), xs[len(xs) // 4]))
    (om, oq), (nm, nq) = out
    print(f"{name:11} old median {om:.3f} q1 {oq:.3f} | new median {nm:.3f} q1 {nq:.3f} us/job | "
          f"new/old median {nm / om:.3f} q1 {nq / oq:.3f} ({len(per['old'])}+{len(per['new'])} samples)")

# move.lua: one pool of N due jobs over 10 topics; batches of 1000 alternate old/new.
r.flushall(); now = float(r.time()[0]); p = r.pipeline(transaction=False)
for i in range(N):
    p.hset(f"delayer:job_bucket:j{i}", mapping={"topic": f"drain{i % TOPICS}", "body": ""})
    p.zadd("delayer:job_pool", {f"j{i}": now - 100 + i / N})
    if i % 5000 == 4999: p.execute()
p.execute()
keys = ["delayer:job_pool", "delayer:malformed", "delayer:scheduled_count", "delayer:topics", "delayer:reserved"]
per = {"old": [], "new": []}
k = 0
while r.zcard("delayer:job_pool") >= 1000:
    v = ("old", "new")[k % 2]; k += 1
    per[v].append(timed(lambda: r.evalsha(shas[(v, "move.lua")], 5, *keys, "delayer:job_bucket:", "delayer:ready_queue:", 1000, "0")[0]))
summary("move", per)

# move_topic.lua: 10 topics' pools; batches alternate.
r.flushall(); p = r.pipeline(transaction=False)
for i in range(N):
    p.zadd(f"delayer:{{drain{i % TOPICS}}}:pool", {f"j{i}": now - 100 + i / N})
    if i % 5000 == 4999: p.execute()
p.execute()
per = {"old": [], "new": []}
k = 0
for t in range(TOPICS):
    # The flow hash (KEYS[4], issue 23) is one key more for scripts that read it, ignored by older ones.
    ks = [f"delayer:{{drain{t}}}:{kind}" for kind in ("pool", "ready", "reserved", "flow")]
    while r.zcard(ks[0]) >= 1000:
        v = ("old", "new")[k % 2]; k += 1
        per[v].append(timed(lambda: r.evalsha(shas[(v, "move_topic.lua")], 4, *ks, 1000)[0]))
summary("move_topic", per)

# push.lua: pipelines of 500 pushes alternate (fresh ids, 10 topics, wake channel on).
r.flushall()
per = {"old": [], "new": []}
for k in range(N // 500):
    v = ("old", "new")[k % 2]
    def run():
        p = r.pipeline(transaction=False)
        for i in range(500):
            j = k * 500 + i
            p.evalsha(shas[(v, "push.lua")], 3, "delayer:job_pool", f"delayer:job_bucket:p{j}", "delayer:scheduled_count",
                      f"p{j}", f"drain{j % TOPICS}", "body", 60000 + j, 604800000, "", "", "", "", "replace", "delayer:wake")
        p.execute(); return 500
    per[v].append(timed(run))
summary("push", per)
srv.terminate()
