"""What waking every waiter costs Redis (docs/design/flow-control.md, §13).

usage: python bench/herd_cost.py [WAITERS]      (default 50)

WAITERS consumers block on one ready list while a producer pushes one id
every 10 ms (400 ids). Two ways to wait, each run once, same Redis:
  brpop  BRPOP takes the id, then one script call on it (as bpop: take.lua)
  peek   BLMOVE q q RIGHT RIGHT wakes without taking, then one script pops
         (as breserve and the Workers' idle waits: reserve.lua)
Prints, per way, the jobs taken (none twice), Redis's time per job from INFO
commandstats and from used_cpu, and the calls of each command: with a peek
every blocked waiter wakes for each push. Starts its own redis-server on a
free loopback port (scriptcost.start_redis).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import List

import redis

from scriptcost import start_redis

JOBS = 400
INTERVAL = 0.01
TAKE = "return redis.call('HGET', KEYS[1], 'x') or 1"
POP = "return redis.call('RPOP', KEYS[1])"


def consume(port: int, mode: str, got: List[bytes], stop: threading.Event) -> None:
    c = redis.Redis(port=port)
    take, pop = c.register_script(TAKE), c.register_script(POP)
    while not stop.is_set():
        if mode == "brpop":
            popped = c.brpop(["q"], 0.5)
            if popped:
                take(keys=["job:" + popped[1].decode()])
                got.append(popped[1])
        elif c.blmove("q", "q", 0.5, "RIGHT", "RIGHT") is not None:
            job = pop(keys=["q"])
            if job:
                got.append(job)


def run(port: int, mode: str, waiters: int) -> None:
    r = redis.Redis(port=port)
    r.flushall()
    got: List[bytes] = []
    stop = threading.Event()
    threads = [threading.Thread(target=consume, args=(port, mode, got, stop)) for _ in range(waiters)]
    for t in threads:
        t.start()
    time.sleep(1)  # all blocked
    r.config_resetstat()
    cpu0 = r.info("cpu")
    for i in range(JOBS):
        r.lpush("q", f"id{i}")
        time.sleep(INTERVAL)
    deadline = time.monotonic() + 5
    while len(got) < JOBS and time.monotonic() < deadline:
        time.sleep(0.01)
    cpu1 = r.info("cpu")
    stats = r.info("commandstats")
    stop.set()
    for t in threads:
        t.join()
    usec = sum(v["usec"] for k, v in stats.items() if not k.startswith(("cmdstat_info", "cmdstat_config")))
    cpu = sum(cpu1[k] - cpu0[k] for k in ("used_cpu_user", "used_cpu_sys")) * 1e6
    calls = {k[len("cmdstat_"):]: v["calls"] for k, v in stats.items() if v["calls"] and "config" not in k}
    print(f"{mode:5} waiters={waiters} taken={len(got)}/{JOBS} twice={len(got) - len(set(got))} "
          f"commandstats {usec / JOBS:.1f} us/job, used_cpu {cpu / JOBS:.1f} us/job, calls {calls}")


def main() -> None:
    waiters = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    server, r = start_redis()
    try:
        for mode in ("brpop", "peek"):
            run(r.connection_pool.connection_kwargs["port"], mode, waiters)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
