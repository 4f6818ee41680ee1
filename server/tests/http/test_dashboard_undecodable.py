"""The dashboard with jobs whose id is not UTF-8: shown as ``base64:...``
(the API's ``id_base64``), and purged by their bytes (``ids_base64``).
Headless Chromium against the real server, as test_dashboard.py."""

from __future__ import annotations

import uuid
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

from conftest import PREFIX, HttpServer
from test_dashboard import click, wait
from test_dashboard_eviction import sign_in
from test_undecodable_ids import b64, ok, plant


def test_a_dead_letter_not_utf8_is_shown_and_purged(server: HttpServer, redis_server: Any,
                                                     browser: WebDriver) -> None:
    r, topic = redis_server.client(), "raw-" + uuid.uuid4().hex[:6]
    layout = ("classic", server, PREFIX)
    waiting, _ = plant(layout, r, topic)
    raw, path = plant(layout, r, topic)
    assert ok(server, "POST", f"{path}/reschedule", {"delay": 0})["due"] is not None
    got = ok(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    assert got is not None and got.get("id_base64") == b64(raw), got
    assert ok(server, "POST", f"{path}/bury", {"receipt": got["receipt"]})["buried"] is True

    sign_in(browser, server)
    browser.get(server.base + f"/#/topics/{topic}/dead")
    dead_row = (By.CSS_SELECTOR, f'#list tr[data-id="base64:{b64(raw)}"]')
    wait(browser, EC.presence_of_element_located(dead_row), "the dead letter, its id as base64")
    click(browser, (By.CSS_SELECTOR, f'#list tr[data-id="base64:{b64(raw)}"] button.purge'), "Purge")
    wait(browser, EC.alert_is_present(), "the confirmation").accept()
    wait(browser, EC.text_to_be_present_in_element((By.ID, "message"), "Purged 1."), "the purge")
    wait(browser, EC.invisibility_of_element_located(dead_row), "the dead letter to leave the list")
    assert ok(server, "GET", f"/v1/topics/{topic}/dead")["dead"] == []
    assert ok(server, "GET", path)["state"] == "unknown"
    # The waiting one: listed as base64, and its link (the id's bytes,
    # percent-encoded) opens its page.
    browser.get(server.base + f"/#/topics/{topic}/scheduled")
    link = (By.CSS_SELECTOR, f'#list tr[data-id="base64:{b64(waiting)}"] a.id')
    click(browser, link, "the waiting job's link")
    wait(browser, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "scheduled", "its page")
    assert f"base64:{b64(waiting)}" in browser.find_element(By.ID, "job").text
