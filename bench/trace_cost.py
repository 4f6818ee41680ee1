"""Same-run cost of the traceparent (issue 22) for jobs without one, in the
classic layout: the scripts before it (main) and with it alternate pipeline
by pipeline on one redis-server, over fresh jobs; Redis's time for each is
read from INFO commandstats (evalsha usec) around it, as bench/guard_cost.py
does. push.lua gets its new ARGV[12] as "" (what every SDK sends without a
traceparent), push_many.lua its tenth value per job; pop.lua reads one more
field (absent). Per script: the median and lower quartile of microseconds
per job, and new/old.

    mkdir -p /tmp/oldlua && git archive main lua | tar -x -C /tmp/oldlua --strip-components=1
    N=200000 taskset -c 1 .venv/bin/python bench/trace_cost.py /tmp/oldlua lua
"""
import os, socket, statistics, subprocess, sys, time
import redis
from scriptcost import evalsha_usec, load, sdk_keys, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
N = int(os.environ.get("N", "200000"))
TOPICS = 10
BATCH = 500

srv, r = start_redis()
shas = load(r, OLD, NEW, ("push.lua", "push_many.lua", "pop.lua"))
usec = lambda: evalsha_usec(r)

def timed(f):
    before = usec(); n = f(); return (usec() - before) / n

def summary(name, per):
    (om, oq), (nm, nq) = [(statistics.median(sorted(per[v])), sorted(per[v])[len(per[v]) // 4]) for v in ("old", "new")]
    print(f"{name:10} old median {om:.3f} q1 {oq:.3f} | new median {nm:.3f} q1 {nq:.3f} us/job | "
          f"new/old median {nm / om:.3f} q1 {nq / oq:.3f} ({len(per['old'])}+{len(per['new'])} samples)")

def push_args(v, j):
    args = [f"p{j}", f"drain{j % TOPICS}", "body", 60000 + j, 604800000, "", "", "", "", "replace", "delayer:wake"]
    return args + [""] if v == "new" else args

# push.lua: pipelines of BATCH single pushes alternate.
r.flushall(); per = {"old": [], "new": []}
for k in range(N // BATCH):
    v = ("old", "new")[k % 2]
    def run():
        p = r.pipeline(transaction=False)
        for i in range(BATCH):
            j = k * BATCH + i
            p.evalsha(shas[(v, "push.lua")], 3, "delayer:job_pool", f"delayer:job_bucket:p{j}",
                      "delayer:scheduled_count", *push_args(v, j))
        p.execute(); return BATCH
    per[v].append(timed(run))
summary("push", per)

# pop.lua: the jobs just pushed, made ready, popped BATCH per pipeline, alternating.
POP_KEYS = sdk_keys("pop")  # ready queue first; the old script ignores the flow keys
r.delete("delayer:job_pool"); p = r.pipeline(transaction=False)
for j in range(N):
    p.lpush("delayer:ready_queue:t", f"p{j}")
    if j % 5000 == 4999: p.execute()
p.execute(); per = {"old": [], "new": []}
for k in range(N // BATCH):
    v = ("old", "new")[k % 2]
    def run():
        p = r.pipeline(transaction=False)
        for _ in range(BATCH):
            p.evalsha(shas[(v, "pop.lua")], len(POP_KEYS), *POP_KEYS, "delayer:job_bucket:")
        p.execute(); return BATCH
    per[v].append(timed(run))
summary("pop", per)

# push_many.lua: calls of 100 jobs alternate (9 values per job before, 10 now).
r.flushall(); per = {"old": [], "new": []}
for k in range(N // 100):
    v = ("old", "new")[k % 2]
    def run():
        argv = ["delayer:job_bucket:", "replace", "delayer:wake"]
        for i in range(100):
            argv += push_args(v, k * 100 + i)[:9] + ([""] if v == "new" else [])
        r.evalsha(shas[(v, "push_many.lua")], 2, "delayer:job_pool", "delayer:scheduled_count", *argv)
        return 100
    per[v].append(timed(run))
summary("push_many", per)
srv.terminate()
