"""Every SDK pair in sentinel mode, through a failover.

One Sentinel deployment (1 master, 1 replica, 3 sentinels: testkit/sentinel.py),
the real delayer server and one driver per SDK, all configured by one
delayer.conf with ``[redis] mode = sentinel`` and the suite's layout
(CONFORMANCE_LAYOUT: classic, or topic for the per-topic layout). Every pusher/consumer pair
(rust, python, php) goes through the server before the master is killed
with SIGKILL; the tests then check every pair again on the promoted replica,
with the same driver processes and the same server: nobody was restarted.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import harness
from conftest import LAYOUT

sys.path.insert(0, str(harness.REPO / "testkit"))
import sentinel as kit  # noqa: E402

SDKS = ["rust", "python", "php"]
PAIRS = list(itertools.product(SDKS, SDKS))


@pytest.fixture(scope="module")
def failed_over(workdir: Path, keys: Any) -> Iterator[Dict[str, harness.Driver]]:
    """Every pair checked, then the master killed; yields the drivers."""
    deployment = kit.Sentinels(workdir, redis_password="conformance-pw")
    d = workdir / "sentinel-mode"
    d.mkdir(exist_ok=True)
    config = f"[delayer]\ntimer_interval = 100\nlayout = {LAYOUT}\n\n{deployment.redis_section()}"
    try:
        with harness.configured(d, config, SDKS, "conformance-pw") as drivers:
            for pusher, consumer in PAIRS:
                harness.through_the_server(drivers, pusher, consumer, "sentinel", "before", kit.FAILOVER_DEADLINE)
            # Every SDK writes the layout the suite runs: a job parked for an hour is in that layout's pool.
            with deployment.master() as r:
                for sdk, driver in drivers.items():
                    topic = f"sentinel-layout-{sdk}"
                    assert driver.request({"op": "push", "topic": topic, "id": "parked", "delay_ms": 3_600_000})["ok"]
                    assert r.zscore(keys.pool_of(topic), "parked") is not None, f"{sdk}: not in the {LAYOUT} layout"
            old = deployment.master_port()
            assert deployment.kill_master() != old
            yield drivers
    finally:
        deployment.stop()


@pytest.mark.parametrize("pusher, consumer", PAIRS)
def test_every_pair_carries_on_after_a_failover(failed_over: Dict[str, harness.Driver], pusher: str,
                                                consumer: str) -> None:
    harness.through_the_server(failed_over, pusher, consumer, "sentinel", "after", kit.FAILOVER_DEADLINE)
