"""The dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium) against the real server. It signs in,
finds a pushed job by id, requeues a dead letter after the confirmation, and
saves a screenshot (target/test-artifacts/dashboard.png; with
UPDATE_SCREENSHOT=1 also docs/img/dashboard.png, the README's)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

import harness
from conftest import REPO, TOKEN, HttpServer, request

ARTIFACTS = REPO / "target" / "test-artifacts"
#: A body that would run a script if the page ever parsed bodies as HTML.
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><b>bold</b>'


def api(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, data, _ = request(server.base, method, path, body)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def wait(driver: WebDriver, condition: Any, what: str) -> Any:
    # The page redraws its tables every 2 s: an element found a moment ago
    # may be gone; look again.
    ignored = (StaleElementReferenceException, NoSuchElementException)
    try:
        return WebDriverWait(driver, harness.DEADLINE, poll_frequency=0.1, ignored_exceptions=ignored).until(condition)
    except Exception as e:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "dashboard-failure.png"))
        raise AssertionError(f"waiting for {what}: {e!r}") from e


def topic_cells(driver: WebDriver, topic: str) -> Any:
    """The texts of a topic's row in the topics table, read in one go."""
    return driver.execute_script(
        "const row = Array.from(document.querySelectorAll('#topics tbody tr'))"
        ".find((r) => r.dataset.topic === arguments[0]);"
        "return row ? Array.from(row.cells).map((c) => c.textContent) : null;", topic)


def click(driver: WebDriver, locator: Any, what: str) -> None:
    def clicked(d: WebDriver) -> bool:
        d.find_element(*locator).click()
        return True
    wait(driver, clicked, what)


def test_sign_in_find_a_job_and_requeue_a_dead_letter(server: HttpServer, browser: WebDriver) -> None:
    topic = "orders-" + uuid.uuid4().hex[:6]
    jobs = f"/v1/topics/{topic}/jobs"
    # A job waiting an hour, and a dead letter with a body that is not text
    # for a browser to interpret.
    api(server, "POST", jobs, {"id": "order:42", "delay": 3600, "body": '{"total": 99}'}, 201)
    for i in range(5):
        api(server, "POST", jobs, {"id": f"order:{100 + i}", "delay": 600 + 60 * i}, 201)
    api(server, "POST", jobs, {"id": "order:7", "delay": 0, "body": HOSTILE}, 201)
    reserved = api(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 20})["job"]
    assert reserved is not None and reserved["id"] == "order:7"
    api(server, "POST", f"{jobs}/order:7/bury", {"receipt": reserved["receipt"]})
    # Some traffic for the chart: 200 jobs due over the next 4 seconds.
    mail = "mail-" + uuid.uuid4().hex[:6]
    api(server, "POST", "/v1/jobs", {"jobs": [{"topic": mail, "id": f"m{i}", "delay": i * 0.02} for i in range(200)]})

    # Sign in: a wrong token is refused, the right one opens the app.
    browser.get(server.base + "/")
    wait(browser, EC.presence_of_element_located((By.NAME, "token")), "the sign-in form")
    browser.find_element(By.NAME, "token").send_keys("not-the-token-at-all")
    browser.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(browser, EC.text_to_be_present_in_element((By.ID, "signin-error"), "not valid"), "the refusal")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(browser, EC.presence_of_element_located((By.ID, "topics")), "the app page")
    # The cookie is HttpOnly: the page's script cannot read the token.
    assert TOKEN not in browser.execute_script("return document.cookie")
    cookie = browser.get_cookie("delayer_session")
    assert cookie is not None and cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"] and cookie.get("expiry") is not None

    # The topic shows with its numbers.
    row = (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"]')
    wait(browser, EC.presence_of_element_located(row), "the topic's row")
    wait(browser, lambda d: (topic_cells(d, topic) or [])[1:5] == ["6", "0", "0", "1"], "the topic's counts")

    # Find the pushed job by id.
    browser.find_element(By.ID, "find-topic").send_keys(topic)
    browser.find_element(By.ID, "find-id").send_keys("order:42")
    browser.find_element(By.CSS_SELECTOR, "#find button").click()
    wait(browser, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "scheduled", "the job")
    shown = browser.find_element(By.ID, "job").text
    assert "order:42" in shown and "due" in shown, shown
    assert "in 59." in shown or "in 60.0 min" in shown, shown
    # A search that fails (the server unreachable) shows the error, not the
    # last job's state.
    browser.execute_script("window.realFetch = window.fetch;"
                           "window.fetch = () => Promise.reject(new Error('server unreachable'));")
    browser.find_element(By.CSS_SELECTOR, "#find button").click()
    wait(browser, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "error", "the failed search")
    assert "server unreachable" in browser.find_element(By.ID, "job").text
    assert "order:42" not in browser.find_element(By.ID, "job").text
    browser.execute_script("window.fetch = window.realFetch;")

    # The dead letter, its body shown as text, never as HTML.
    click(browser, row, "the topic's row")
    dead_row = (By.CSS_SELECTOR, '#dead tr[data-id="order:7"]')
    wait(browser, EC.presence_of_element_located(dead_row), "the dead letter")
    body_cell = (By.CSS_SELECTOR, '#dead tr[data-id="order:7"] td.body')
    wait(browser, lambda d: d.find_element(*body_cell).text == HOSTILE, "the body shown as text")
    assert browser.find_elements(By.CSS_SELECTOR, "#dead img, #dead b") == []
    assert browser.title != "pwned"
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#scheduled tbody tr")) == 6, "scheduled jobs")
    wait(browser, lambda d: (topic_cells(d, mail) or [])[1:3] == ["0", "200"], "the mail jobs moved")
    wait(browser, lambda d: "200 moved" in d.find_element(By.ID, "chart-summary").text
         or "201 moved" in d.find_element(By.ID, "chart-summary").text, "the chart")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_SCREENSHOT"):
        (REPO / "docs" / "img").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, REPO / "docs" / "img" / "dashboard.png")

    # Requeue it: dismissing the confirmation does nothing, accepting does.
    requeue = (By.CSS_SELECTOR, '#dead tr[data-id="order:7"] button.requeue')
    click(browser, requeue, "Requeue")
    wait(browser, EC.alert_is_present(), "the confirmation").dismiss()
    assert api(server, "GET", f"{jobs}/order:7")["state"] == "dead"
    click(browser, requeue, "Requeue")
    wait(browser, EC.alert_is_present(), "the confirmation").accept()
    wait(browser, EC.text_to_be_present_in_element((By.ID, "message"), "Requeued 1."), "the requeue")
    wait(browser, EC.invisibility_of_element_located(dead_row), "the dead letter to leave the list")
    assert api(server, "GET", f"{jobs}/order:7")["state"] in ("scheduled", "ready")
    browser.save_screenshot(str(ARTIFACTS / "dashboard-after-requeue.png"))
