"""Same-run Redis cost of a Worker's reserve + ack, for reserve.lua from two
or more script folders (issue 21: what a change to reserve.lua saves).

Each case fills one topic's ready queue with N jobs (push_many.lua from this
checkout's lua/, then moved by hand, not timed), then drains it as a Worker
does: reserve.lua in batch mode, 50 jobs a call, each call acking the jobs of
the call before. Redis's own time in EVALSHA (INFO commandstats) over the
drain, per job. Cases run in turn, the order reversed every other round,
each from an empty keyspace; the median over ROUNDS and each folder's ratio
to the first are printed.

    mkdir -p /tmp/oldlua && git archive <commit> lua | tar -x -C /tmp/oldlua --strip-components=1
    ROUNDS=6 N=20000 nice -n -10 .venv/bin/python bench/reserve_cost.py /tmp/oldlua lua
"""
import os, statistics, sys
from scriptcost import evalsha_usec, sdk_keys, start_redis

FOLDERS = sys.argv[1:]
ROUNDS, N, BATCH = int(os.environ.get("ROUNDS", "6")), int(os.environ.get("N", "20000")), 50
P = "delayer:"
KEYS = sdk_keys("reserve", P)  # ready, reserved, ..., flow, gate (older scripts ignore the keys they lack)
HERE = os.path.dirname(os.path.abspath(__file__))

srv, r = start_redis()
with open(os.path.join(HERE, "..", "lua", "push_many.lua")) as f:
    push = r.script_load(f.read())
shas = {}
for d in FOLDERS:
    with open(os.path.join(d, "reserve.lua")) as f:
        shas[d] = r.script_load(f.read())
per = {d: [] for d in FOLDERS}
for rnd in range(ROUNDS):
    for d in (FOLDERS if rnd % 2 == 0 else list(reversed(FOLDERS))):
        r.flushall()
        p = r.pipeline(transaction=False)
        for c in range(N // 100):
            argv = [P + "job_bucket:", "replace", ""]
            for j in range(100):
                argv += [f"id{c}_{j}", "t", b"x" * 32, 0, 86400000, "", "", "", "", ""]
            p.evalsha(push, 2, P + "job_pool", P + "scheduled_count", *argv)
        p.execute()
        ids = r.zrange(P + "job_pool", 0, -1)
        for i in range(0, len(ids), 1000):
            r.lpush(KEYS[0], *ids[i:i + 1000])
        r.delete(P + "job_pool")
        before, acks, acked = evalsha_usec(r), [], 0
        while True:
            argv = [P + "job_bucket:", 60000, BATCH]
            for a in acks:
                argv += a
            flags, jobs = r.evalsha(shas[d], len(KEYS), *KEYS, *argv, P + "wake")
            acked += sum(flags)
            acks = [[j[0], j[5]] for j in jobs]
            if not jobs:
                break
        assert acked == N and r.zcard(KEYS[1]) == 0, (d, acked)
        per[d].append((evalsha_usec(r) - before) / N)
first = statistics.median(per[FOLDERS[0]])
for d, xs in per.items():
    m = statistics.median(xs)
    print(f"{d:24} median {m:6.3f} us/job  x{m / first:.3f}  {[round(x, 2) for x in xs]}")
srv.terminate()
