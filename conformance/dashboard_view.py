"""The dashboard's view of one job, for test_conformance_inspect.py: what a
person sees after typing the topic and id into "Find a job" and pressing
Find, read from the page's text in headless Chromium (never from the API's
JSON behind it).

The page is served by the HttpView's server (http_view.py: a real
``delayer`` reading a replica, no ``http_token``, so ``/`` opens the app
without signing in). One browser for the whole test module, started on
first use and closed when the tests end, as the HttpView is.
"""

from __future__ import annotations

import atexit
import datetime
import re
from typing import Any, Dict, List, Optional

import redis
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import harness
from browser import Browser
from http_view import shared_view

ARTIFACTS = harness.REPO / "target" / "test-artifacts"
#: The job panel's labels (app.js findJob) -> the test's field names.
LABELS = {"state": "state", "topic": "topic", "id": "id", "due": "due", "deadline": "deadline", "died": "dead_at",
          "body size": "body_size", "attempts": "attempts", "max attempts": "max_attempts",
          "dead reason": "dead_reason", "last error": "last_error", "traceparent": "traceparent", "flow": "flow"}
NUMBERS = ("body_size", "attempts", "max_attempts")
TIMES = ("due", "deadline", "dead_at")
#: A time as the page shows it: UTC, to the millisecond (a due time is followed by "(in 10.0 min)").
SHOWN_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC(?: \(.*\))?$")

#: Empties the panel, then presses Find, so what is read next is this search's answer.
_FIND = """
const job = document.getElementById('job');
job.replaceChildren();
delete job.dataset.state;
"""
#: The panel's rows as shown: [[label, text], ...], once the answer (or an error) is drawn; else null.
_SHOWN = """
const job = document.getElementById('job');
const labels = Array.from(job.querySelectorAll('dt')).map((e) => e.innerText.trim());
if (job.dataset.state === undefined && !labels.includes('error')) return null;
return Array.from(job.querySelectorAll('dt')).map((dt) => {
  const dd = dt.nextElementSibling;
  return [dt.innerText.trim(), dd ? dd.innerText.trim() : ''];
});
"""


def shown_time(text: str) -> float:
    match = SHOWN_TIME.match(text)
    assert match is not None, f"not a time as the dashboard shows one: {text!r}"
    at = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f")
    return at.replace(tzinfo=datetime.timezone.utc).timestamp()


def parse(rows: List[List[str]]) -> Dict[str, Any]:
    """The panel's rows in the test's shape: what is not shown is null."""
    view: Dict[str, Any] = {field: None for field in LABELS.values()}
    for label, text in rows:
        assert label != "error", f"the dashboard showed an error: {text}"
        assert label in LABELS, f"the job panel shows a row this view does not know: {label!r} = {text!r}"
        field = LABELS[label]
        if text == "":
            continue
        if field in NUMBERS:
            view[field] = int(text)
        elif field in TIMES:
            view[field] = shown_time(text)
        else:
            view[field] = text
    # The panel leaves out what is empty; `flow` is "" while the topic runs.
    view["flow"] = view["flow"] or ""
    return view


class DashboardView:
    """A headless Chromium with the dashboard of ``base`` open."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.browser = Browser()
        atexit.register(self.browser.quit)
        self.driver = self.browser.driver
        self.driver.get(base + "/")
        # app.js has started (its Find handler is on) once it wrote a status.
        self._wait(lambda d: d.find_element(By.ID, "status").text.strip() != "", "the dashboard to start")

    def _wait(self, condition: Any, what: str) -> Any:
        try:
            return WebDriverWait(self.driver, harness.DEADLINE, poll_frequency=0.05).until(condition)
        except TimeoutException as e:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(ARTIFACTS / "dashboard-view-failure.png"))
            raise AssertionError(f"waiting for {what} on {self.base}: {e!r}") from e

    def job(self, topic: str, job_id: str) -> Dict[str, Any]:
        """Find ``job_id`` of ``topic`` with the page's form; the answer as shown."""
        d = self.driver
        for field, value in (("find-topic", topic), ("find-id", job_id)):
            box = d.find_element(By.ID, field)
            box.clear()
            box.send_keys(value)
            assert box.get_attribute("value") == value, f"{field}: typed {value!r}"
        d.execute_script(_FIND)
        d.find_element(By.CSS_SELECTOR, "#find button").click()
        rows: List[List[str]] = self._wait(lambda d: d.execute_script(_SHOWN), f"job {job_id!r} to be shown")
        return parse(rows)


_view: Optional[DashboardView] = None


def dashboard_view(master: "redis.Redis", master_port: int, prefix: str, topic: str, job_id: str,
                   layout: str = "classic") -> Dict[str, Any]:
    """The dashboard's view of ``job_id``; starts the HttpView and the browser once."""
    global _view
    server = shared_view(master_port, prefix, layout)
    server.catch_up(master)
    if _view is None:
        _view = DashboardView(f"http://127.0.0.1:{server.port}")
    return _view.job(topic, job_id)
