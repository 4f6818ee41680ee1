"""Every SDK pair in sentinel mode, through a failover.

One Sentinel deployment (1 master, 1 replica, 3 sentinels: testkit/sentinel.py),
the real delayer server and one driver per SDK, all configured by one
delayer.conf with ``[redis] mode = sentinel``. Every pusher/consumer pair
(rust, python, php) goes through the server before the master is killed
with SIGKILL; the tests then check every pair again on the promoted replica,
with the same driver processes and the same server: nobody was restarted.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import harness

sys.path.insert(0, str(harness.REPO / "testkit"))
import sentinel as kit  # noqa: E402

SDKS = ["rust", "python", "php"]
PAIRS = list(itertools.product(SDKS, SDKS))


def driver_argv(name: str, config: Path) -> List[str]:
    """A driver on ``config`` instead of a URL."""
    if name == "rust":
        exe = harness.binary("DELAYER_DRIVER_BIN", "delayer-conformance-driver", "delayer-conformance-driver")
        return [str(exe), "--config", str(config)]
    if name == "python":
        return [sys.executable, str(harness.HERE / "drivers" / "python_driver.py"), "--config", str(config)]
    php = shutil.which(os.environ.get("PHP", "php")) or "php"
    return [php, str(harness.HERE / "drivers" / "php_driver.php"), "--config", str(config)]


def through_the_server(drivers: Dict[str, harness.Driver], pusher: str, consumer: str, tag: str) -> None:
    """``pusher`` pushes a job due now, the server moves it, ``consumer`` pops
    it; a call failing while a failover is under way is made again."""
    topic = f"sentinel-{pusher}-{consumer}-{tag}"
    job_id = f"{pusher}>{consumer}:{tag}"
    deadline = time.monotonic() + kit.FAILOVER_DEADLINE
    pushed = False
    last: Any = None
    while time.monotonic() < deadline:
        if not pushed:
            last = drivers[pusher].request({"op": "push", "topic": topic, "id": job_id, "delay_ms": 0,
                                            "body_b64": "aGk="})
            pushed = last.get("ok") is True
        else:
            last = drivers[consumer].request({"op": "bpop", "topic": topic, "timeout_ms": 1000})
            if last.get("ok") and last.get("job") is not None:
                assert last["job"] == {"id": job_id, "topic": topic, "body_b64": "aGk="}
                return
        if not last.get("ok"):
            assert str(last.get("error", "")).startswith("connection"), f"{pusher}>{consumer}: {last}"
            time.sleep(0.1)
    raise AssertionError(f"{pusher}>{consumer} ({tag}): no job within the deadline; last answer {last}")


@pytest.fixture(scope="module")
def failed_over(workdir: Path) -> Iterator[Dict[str, harness.Driver]]:
    """Every pair checked, then the master killed; yields the drivers."""
    deployment = kit.Sentinels(workdir, redis_password="conformance-pw")
    d = workdir / "sentinel-mode"
    d.mkdir(exist_ok=True)
    config = d / "delayer.conf"
    config.write_text(f"[delayer]\ntimer_interval = 100\n\n{deployment.redis_section()}")
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    log = open(d / "server.log", "wb")
    server = subprocess.Popen([str(exe), "-c", str(config)], cwd=d, stdin=subprocess.DEVNULL, stdout=log,
                              stderr=subprocess.STDOUT)
    drivers = {name: harness.Driver(f"sentinel-{name}", driver_argv(name, config), d) for name in SDKS}
    try:
        for pusher, consumer in PAIRS:
            through_the_server(drivers, pusher, consumer, "before")
        old = deployment.master_port()
        assert deployment.kill_master() != old
        yield drivers
        assert server.poll() is None, f"the server exited: {harness.tail(d / 'server.log')}"
        assert "conformance-pw" not in harness.tail(d / "server.log", 1_000_000)
    finally:
        for driver in drivers.values():
            driver.stop()
        harness.stop_process(server)
        log.close()
        deployment.stop()


@pytest.mark.parametrize("pusher, consumer", PAIRS)
def test_every_pair_carries_on_after_a_failover(failed_over: Dict[str, harness.Driver], pusher: str,
                                                consumer: str) -> None:
    through_the_server(failed_over, pusher, consumer, "after")
