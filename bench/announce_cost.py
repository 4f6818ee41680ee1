"""What announcing costs Redis (issue 21: the scripts announce, the server
owns the per-topic index): Redis µs per call of push.lua, reserve.lua and
touch.lua in the per-topic layout, today's scripts with the wake channel
against the previous ones without it (the per-topic callers passed "" and
wrote the index themselves), in the same run.

usage: .venv/bin/python bench/announce_cost.py [--calls N] [--rounds N] [--old GIT_REV]

Each round, per script and version: FLUSHALL, then N calls on one topic
(push: delays growing, so only the first call lowers the head and
publishes, as in a steady stream; push "every": delays shrinking, so every
call publishes, the worst case; reserve: a ready list of N jobs, ttr
growing; touch: the reserved jobs, each to a later deadline). Prints µs of
EVALSHA per call (INFO commandstats) and the ratio new / old; for push also
"old+index": the old script plus the index write each SDK sent with it
(ZADD <prefix>due LT CH, SADD <prefix>topics), which the announcement
replaces.
"""
import argparse, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(__file__))
from scriptcost import start_redis, load, evalsha_usec, sdk_keys  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["push.lua", "reserve.lua", "touch.lua"]


def old_scripts(rev):
    d = tempfile.mkdtemp(prefix="announce-old-")
    for n in NAMES:
        with open(os.path.join(d, n), "wb") as f:
            f.write(subprocess.check_output(["git", "-C", ROOT, "show", f"{rev}:lua/{n}"]))
    return d


def index_usec(r):
    """Microseconds Redis has spent in ZADD and SADD so far."""
    stats = r.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("zadd", "sadd"))


def run(r, sha, case, calls, wake):
    r.flushall()
    pool, rq, res = "d:{t}:pool", "d:{t}:ready", "d:{t}:reserved"
    bucket = "d:{t}:job:"
    if case in ("push", "push every"):
        before, index_before = evalsha_usec(r), index_usec(r)
        for i in range(calls):
            delay = 10_000 + (i if case == "push" else calls - i)
            if wake:
                r.evalsha(sha, 2, pool, bucket + str(i), str(i), "t", "", delay, 60_000, "", "", "", "", "", wake)
            else:  # the old per-topic push: the script, then the SDK's index write in the same pipeline
                p = r.pipeline(transaction=False)
                p.evalsha(sha, 2, pool, bucket + str(i), str(i), "t", "", delay, 60_000, "", "", "", "", "", "")
                p.execute_command("ZADD", "d:due", "LT", "CH", 1e9 + delay, "t")
                p.sadd("d:topics", "t")
                p.execute()
        run.index = index_usec(r) - index_before
        return evalsha_usec(r) - before
    r.lpush(rq, *range(calls))
    for i in range(calls):
        r.hset(bucket + str(i), mapping={"topic": "t", "body": ""})
    keys = sdk_keys("reserve", "d:", "topic")  # the old scripts ignore the flow keys
    assert keys[:2] == [rq, res] and keys[4] == pool
    before = evalsha_usec(r)
    for i in range(calls):
        args = [bucket, 30_000 + i] + (["", wake] if wake else [])
        r.evalsha(sha if case == "reserve" else sha[0], len(keys), *keys, *args)
    if case == "reserve":
        return evalsha_usec(r) - before
    before = evalsha_usec(r)
    for i in range(calls):
        args = [str(i), "", 60_000 + i] + ([wake] if wake else [])
        r.evalsha(sha[1], 3, res, bucket + str(i), pool, *args)
    return evalsha_usec(r) - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", default="main")
    a = ap.parse_args()
    srv, r = start_redis()
    try:
        shas = load(r, old_scripts(a.old), os.path.join(ROOT, "lua"), NAMES)
        cases = {"push": "push.lua", "push every": "push.lua", "reserve": "reserve.lua", "touch": "touch.lua"}
        for rnd in range(a.rounds):
            for case, name in cases.items():
                got = {}
                for v, wake in (("old", ""), ("new", "d:wake")):
                    sha = shas[(v, name)]
                    if case == "touch":
                        sha = (shas[(v, "reserve.lua")], sha)
                    got[v] = run(r, sha, case, a.calls, wake) / a.calls
                    if v == "old" and case.startswith("push"):
                        got["index"] = got["old"] + run.index / a.calls
                extra = ""
                if "index" in got:
                    extra = f"  old+index {got['index']:.2f} µs  new/(old+index) {got['new'] / got['index']:.3f}"
                print(f"round {rnd + 1}  {case:11s} old {got['old']:.2f} µs  new {got['new']:.2f} µs  "
                      f"new/old {got['new'] / got['old']:.3f}{extra}")
    finally:
        srv.terminate()


if __name__ == "__main__":
    main()
