#!/usr/bin/env python3
"""Takes the README's dashboard screenshots (docs/img/) in headless Chromium:
starts a redis-server and the delayer server (HTTP API on) on free loopback
ports, fills them with tools/demo-data.py's realistic set (sms.remind then
paused, with reminders held back; webhooks.retry rate-limited, its jobs over
the limit held), and shoots the
overview, a topic's dead letters and a dead job's page at desktop width, and
the overview and the dead letters at 400 px. Stops what it started.

Usage: tools/screenshots.py [--out docs/img]   (run from anywhere; needs
target/debug/delayer or DELAYER_BIN, redis-server, chromium and
chromium-driver, and the selenium package: tools/install-deps.sh)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "conformance"))

import harness  # noqa: E402
from browser import Browser  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

TOKEN = "demo-token-0123456789abcdef"


def demo_data() -> Any:
    spec = importlib.util.spec_from_file_location("demo_data", REPO / "tools" / "demo-data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def until(driver: Any, check: Callable[[Any], Any], what: str) -> None:
    try:
        WebDriverWait(driver, harness.DEADLINE, poll_frequency=0.1).until(check)
    except Exception as e:
        raise SystemExit(f"waiting for {what}: {e!r}") from e


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="delayer-shots-"))
    redis_server = harness.RedisServer(work)
    port = harness.free_port()
    conf = work / "delayer.conf"
    conf.write_text(f"[delayer]\ntimer_interval = 100\nlayout = topic\nhttp_addr = 127.0.0.1:{port}\n"
                    f"http_token = {TOKEN}\n\n[redis]\nhost = 127.0.0.1\nport = {redis_server.port}\n")
    import subprocess
    exe = harness.binary("DELAYER_BIN", "delayer", "delayer-server")
    log = open(work / "server.log", "wb")
    server = subprocess.Popen([str(exe), "-c", str(conf)], cwd=work, stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=harness._die_with_parent)
    base = f"http://127.0.0.1:{port}"
    browser = None
    try:
        api = demo_data().Api(base, TOKEN)
        if not harness.wait_until(lambda: _answers(api), step=0.1):
            raise SystemExit(f"the server did not answer: {harness.tail(work / 'server.log')}")
        # The partner's endpoint takes 2 calls a second: webhooks.retry limited
        # before its trickle (4 a second) is pushed, so the overview shows the
        # limit's badge ("2/s") and the jobs over it held.
        api.call("PUT", "/v1/topics/webhooks.retry/limit", {"per_second": 2, "burst": 5})
        demo_data().fill(api, seed=7)
        # The SMS gateway is down: sms.remind paused (the overview's badge), and
        # reminders falling due meanwhile held back (its held count).
        api.call("POST", "/v1/topics/sms.remind/pause")
        api.push_many([{"topic": "sms.remind", "id": f"sms:held-{n}", "delay": 0,
                        "body": json.dumps({"to": f"+46701234{n:03d}", "template": "table_ready"})}
                       for n in range(5)])
        # The chart: the trickle of webhooks.retry moves for a minute; 20 s of it is enough to show.
        time.sleep(20)
        browser = Browser()
        d = browser.driver
        d.set_window_size(1280, 900)
        d.get(base + "/")
        d.find_element(By.NAME, "token").send_keys(TOKEN)
        d.find_element(By.CSS_SELECTOR, "#signin button").click()
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#topics tbody tr")) >= 5, "the topics")
        until(d, lambda d: d.find_elements(By.CSS_SELECTOR, '#topics tr[data-topic="webhooks.retry"] .badge.limited'),
              "the rate limit's badge")
        args.out.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(args.out / "dashboard.png"))
        d.get(base + "/#/topics/sms.remind/dead")
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#list tbody tr[data-id]")) >= 7, "the dead letters")
        d.save_screenshot(str(args.out / "dashboard-dead.png"))
        d.find_element(By.CSS_SELECTOR, "#list tbody tr[data-id] a.id").click()
        until(d, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "dead", "the job page")
        d.save_screenshot(str(args.out / "dashboard-job.png"))
        d.set_window_size(400, 860)
        d.get(base + "/#/topics/sms.remind/dead")
        until(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#list tbody tr[data-id]")) >= 7, "400 px")
        d.save_screenshot(str(args.out / "dashboard-400px.png"))
        for name in ("dashboard.png", "dashboard-dead.png", "dashboard-job.png", "dashboard-400px.png"):
            print(args.out / name)
        return 0
    finally:
        if browser is not None:
            browser.quit()
        harness.stop_process(server)
        log.close()
        redis_server.stop()


def _answers(api: Any) -> bool:
    try:
        api.call("GET", "/v1/health")
        return True
    except (OSError, SystemExit):
        return False


if __name__ == "__main__":
    sys.exit(main())
