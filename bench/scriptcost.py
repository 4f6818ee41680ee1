"""What the same-run script-cost benches share (guard_cost.py, trace_cost.py,
outcome_cost.py): a private redis-server on a free loopback port, the old and
new copies of the scripts loaded side by side, and Redis's own time spent in
EVALSHA, read from INFO commandstats (so client and network time, and the
setup writes, are not counted)."""
import os, socket, subprocess, sys, time
import redis

# The SDK's call builders: a bench sends the KEYS a script's header lists, in
# its order, from the one place that translates the headers (lua/*.lua).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk-python", "src"))
from delayer import Keys, _calls  # noqa: E402

_BUILDERS = {
    "pop": lambda k: _calls.pop_call(k, "t"),
    "take": lambda k: _calls.take_call(k, "t", "ID"),
    "reserve": lambda k: _calls.reserve_call(k, "t", 30),
}


def sdk_keys(script, prefix="delayer:", layout="classic"):
    """The KEYS the Python SDK sends to ``script`` (pop, take, reserve) for topic "t"
    (take's bucket key is for the id "ID")."""
    return list(_BUILDERS[script](Keys(prefix, layout)).keys)


def start_redis():
    """A throwaway redis-server (no persistence) and a client to it."""
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no"], stdout=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    for _ in range(100):
        try:
            r.ping(); break
        except redis.ConnectionError:
            time.sleep(0.05)
    return srv, r


def load(r, old, new, names):
    """{("old"|"new", name): sha} for each script name, from the two folders."""
    def src(d, n):
        with open(os.path.join(d, n)) as f:
            return f.read()
    return {(v, n): r.script_load(src(d, n)) for v, d in (("old", old), ("new", new)) for n in names}


def evalsha_usec(r):
    """Microseconds Redis has spent in EVALSHA so far."""
    return r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)
