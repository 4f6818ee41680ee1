"""Same-run Redis cost of push_many.lua and push_many_topic.lua against the
bare write (issue 21's target: push_many <= 1.2x the bare ZADD + HSET +
PEXPIRE script of bench/lifecycle_cost.py), for two script folders (before
and after a change) on one redis-server. Every case pushes 100 calls of 100
fresh jobs (32-byte bodies, one delay, no wake channel), in turn, the order
reversed every other round, each slice from an empty keyspace (Redis's time
per command grows with the keyspace on this VM); Redis's time is INFO
commandstats (evalsha usec) around each slice. Prints the median us/job per
case, each against the bare write, and new/old per layout.

    mkdir -p /tmp/oldlua && git archive <before> lua | tar -x -C /tmp/oldlua --strip-components=1
    ROUNDS=16 nice -n -10 .venv/bin/python bench/push_many_cost.py /tmp/oldlua lua
"""
import os, statistics, sys
from scriptcost import evalsha_usec, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
ROUNDS = int(os.environ.get("ROUNDS", "16"))
BODY = b"x" * 32
HERE = os.path.dirname(os.path.abspath(__file__))
BARE = open(os.path.join(HERE, "lifecycle_cost.py")).read().split('BARE_WRITE = """')[1].split('"""')[0]
LAYOUTS = {  # layout -> (pool, bucket prefix, extra keys, script)
    "classic": ("delayer:job_pool", "delayer:job_bucket:", ["delayer:scheduled_count"], "push_many.lua"),
    "topic": ("delayer:{t}:pool", "delayer:{t}:job:", [], "push_many_topic.lua"),
}


def src(folder, name):
    with open(os.path.join(folder, name)) as f:
        return f.read()


srv, r = start_redis()
shas = {"bare": r.script_load(BARE)}
for layout, (_, _, _, script) in LAYOUTS.items():
    for side, folder in (("old", OLD), ("new", NEW)):
        shas[f"{layout} {side}"] = r.script_load(src(folder, script))
per = {c: [] for c in shas}
seq = 0
for rnd in range(ROUNDS):
    for case in (list(shas) if rnd % 2 == 0 else list(reversed(shas))):
        pool, prefix, extra, _ = LAYOUTS["classic" if case == "bare" else case.split()[0]]
        p = r.pipeline(transaction=False)
        for _ in range(100):
            argv = [prefix] if case == "bare" else [prefix, "replace", ""]
            for _ in range(100):
                seq += 1
                argv += [f"id{seq}", "t", BODY, 60000, 60000] + ([] if case == "bare" else [""] * 5)
            keys = [pool] if case == "bare" else [pool, *extra]
            p.evalsha(shas[case], len(keys), *keys, *argv)
        r.flushall()
        before = evalsha_usec(r)
        p.execute()
        per[case].append((evalsha_usec(r) - before) / 10_000)
bare = statistics.median(per["bare"])
for case, xs in per.items():
    print(f"{case:12} median {statistics.median(xs):6.3f} us/job  {statistics.median(xs) / bare:.3f}x bare")
for layout in LAYOUTS:
    old, new = (statistics.median(per[f"{layout} {side}"]) for side in ("old", "new"))
    print(f"{layout:12} new/old {new / old:.3f}")
srv.terminate()
