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
EVALSHA per call (INFO commandstats) and the ratio new / old.
"""
import argparse, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(__file__))
from scriptcost import start_redis, load, evalsha_usec  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["push.lua", "reserve.lua", "touch.lua"]


def old_scripts(rev):
    d = tempfile.mkdtemp(prefix="announce-old-")
    for n in NAMES:
        with open(os.path.join(d, n), "wb") as f:
            f.write(subprocess.check_output(["git", "-C", ROOT, "show", f"{rev}:lua/{n}"]))
    return d


def run(r, sha, case, calls, wake):
    r.flushall()
    pool, rq, res = "d:{t}:pool", "d:{t}:ready", "d:{t}:reserved"
    bucket = "d:{t}:job:"
    if case in ("push", "push every"):
        before = evalsha_usec(r)
        for i in range(calls):
            delay = 10_000 + (i if case == "push" else calls - i)
            r.evalsha(sha, 2, pool, bucket + str(i), str(i), "t", "", delay, 60_000, "", "", "", "", "", wake)
        return evalsha_usec(r) - before
    r.lpush(rq, *range(calls))
    for i in range(calls):
        r.hset(bucket + str(i), mapping={"topic": "t", "body": ""})
    keys = [rq, res, "d:{t}:malformed", "d:{t}:receipt_seq", pool, "d:{t}:outcomes"]
    before = evalsha_usec(r)
    for i in range(calls):
        args = [bucket, 30_000 + i] + (["", wake] if wake else [])
        r.evalsha(sha if case == "reserve" else sha[0], 6, *keys, *args)
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
                print(f"round {rnd + 1}  {case:11s} old {got['old']:.2f} µs  new {got['new']:.2f} µs  "
                      f"new/old {got['new'] / got['old']:.3f}")
    finally:
        srv.terminate()


if __name__ == "__main__":
    main()
