"""Same-run cost of the script pairs (issue 21, one shape per script): push
and push_many before the split, which guessed the layout from whether the
scheduled counts were sent, against push.lua / push_topic.lua and
push_many.lua / push_many_topic.lua after it, in both layouts, on one
redis-server. Every case runs a slice of fresh jobs in turn (the order
reversed every other round), each from an empty keyspace; Redis's time is
read from INFO commandstats (evalsha usec) around each slice. Per case: the median microseconds per
job over the rounds, and new/old per layout.

    mkdir -p /tmp/oldlua && git archive 979fcba lua | tar -x -C /tmp/oldlua --strip-components=1
    ROUNDS=8 nice -n -10 .venv/bin/python bench/pair_cost.py /tmp/oldlua lua
"""
import os, statistics, sys
from scriptcost import evalsha_usec, start_redis

OLD, NEW = sys.argv[1], sys.argv[2]
ROUNDS = int(os.environ.get("ROUNDS", "8"))
WAKE, BODY = "delayer:wake", b"x" * 32


def src(d, n):
    with open(os.path.join(d, n)) as f:
        return f.read()


srv, r = start_redis()
# case -> (script folder, file, layout, bulk)
CASES = {
    "push classic old": (OLD, "push.lua", "classic", False), "push classic new": (NEW, "push.lua", "classic", False),
    "push topic old": (OLD, "push.lua", "topic", False), "push topic new": (NEW, "push_topic.lua", "topic", False),
    "push_many classic old": (OLD, "push_many.lua", "classic", True),
    "push_many classic new": (NEW, "push_many.lua", "classic", True),
    "push_many topic old": (OLD, "push_many.lua", "topic", True),
    "push_many topic new": (NEW, "push_many_topic.lua", "topic", True),
}
shas = {c: r.script_load(src(d, f)) for c, (d, f, _, _) in CASES.items()}
per = {c: [] for c in CASES}
seq = 0
for rnd in range(ROUNDS):
    for case in (list(CASES) if rnd % 2 == 0 else list(reversed(CASES))):
        _, _, layout, bulk = CASES[case]
        pool, prefix = ("delayer:job_pool", "delayer:job_bucket:") if layout == "classic" else \
            ("delayer:{t}:pool", "delayer:{t}:job:")
        counts = ["delayer:scheduled_count"] if layout == "classic" else []
        p, jobs = r.pipeline(transaction=False), 0
        for _ in range(100 if bulk else 5000):
            if bulk:
                argv = [prefix, "replace", WAKE]
                for _ in range(100):
                    seq += 1
                    argv += [f"id{seq}", "t", BODY, 60000, 60000, "", "", "", "", ""]
                p.evalsha(shas[case], 1 + len(counts), pool, *counts, *argv)
                jobs += 100
            else:
                seq += 1
                p.evalsha(shas[case], 2 + len(counts), pool, f"{prefix}id{seq}", *counts, f"id{seq}", "t", BODY,
                          60000, 60000, "", "", "", "", "replace", WAKE, "")
                jobs += 1
        r.flushall()  # each slice from an empty keyspace: no case pays another's dict growth
        before = evalsha_usec(r)
        p.execute()
        per[case].append((evalsha_usec(r) - before) / jobs)
for case, xs in per.items():
    print(f"{case:24} median {statistics.median(xs):6.3f} us/job  {[round(x, 2) for x in xs]}")
for pair in ("push classic", "push topic", "push_many classic", "push_many topic"):
    old, new = (statistics.median(per[f"{pair} {v}"]) for v in ("old", "new"))
    print(f"{pair:20} new/old {new / old:.3f}")
srv.terminate()
