"""Push/pop throughput of the Python SDK, for delayer-bench (bench/README.md).

usage: python sdk_bench.py REDIS_URL OPS MOVE_LUA

Pushes OPS jobs (delay 0) one by one to topic py_a, OPS more with one
push_many to topic py_b, moves them all to the ready queues with move.lua
(not timed), then pops OPS from py_a and bpops OPS from py_b. Prints one JSON
line of jobs/s: {"push": ..., "push_many": ..., "pop": ..., "bpop": ...}.
"""

import json
import sys
import time

from delayer import Delayer, Job

BODY = b'{"order":1234567,"act":"close"}'


def main() -> None:
    url, ops, move_lua = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    d = Delayer(url)
    d.push("warm", "warm-1", 3600)  # connect, load the script
    d.pop("warm")
    rates = {}

    t = time.perf_counter()
    for i in range(ops):
        d.push("py_a", f"py-a-{i}", 0, BODY)
    rates["push"] = ops / (time.perf_counter() - t)

    jobs = [Job("py_b", f"py-b-{i}", 0, BODY) for i in range(ops)]
    t = time.perf_counter()
    d.push_many(jobs)
    rates["push_many"] = ops / (time.perf_counter() - t)

    with open(move_lua, "rb") as f:
        sha = d.redis.script_load(f.read())
    moved = 0
    while True:
        # move.lua's header: KEYS pool, malformed, scheduled_count, topics; ARGV bucket prefix, ready prefix, batch
        taken = d.redis.evalsha(sha, 4, "delayer:job_pool", "delayer:malformed", "delayer:scheduled_count",
                                "delayer:topics", "delayer:job_bucket:", "delayer:ready_queue:", 1000)[0]
        moved += taken
        if taken < 1000:
            break
    assert moved == 2 * ops, f"moved {moved}"

    t = time.perf_counter()
    for _ in range(ops):
        assert d.pop("py_a") is not None
    rates["pop"] = ops / (time.perf_counter() - t)

    t = time.perf_counter()
    for _ in range(ops):
        assert d.bpop("py_b", 1) is not None
    rates["bpop"] = ops / (time.perf_counter() - t)

    d.close()
    print(json.dumps(rates))


if __name__ == "__main__":
    main()
