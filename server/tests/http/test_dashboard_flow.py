"""Pausing and resuming a topic from the dashboard's overview (issue 23;
PROTOCOL.md, "Flow control (pause)"), in headless Chromium against the real
server and Redis: a full-access session pauses a topic with its button,
after a confirmation (dismissing it changes nothing); the row shows
"paused <how long>" and the due jobs the pause holds back, and so does the
topic's page; Redis has the flow hash's `paused` field; Resume, without a
question, clears it all and the held jobs become ready. A failed pause is
said as the dashboard says errors. A read-only session sees the badge but
no button, and a forged POST (its own fetch, or the button put back by
hand) gets 403. At 400 px the row is a card that fits, its button in reach.
The same through the buttons on the per-topic layout (its flow hash
`<prefix>{<topic>}:flow`).

A rate-limited topic (PROTOCOL.md, "Rate limits") shows its rate in the
unit that makes it 1 or more, as `delayer stats` prints it ("30/min" for
0.5 a second, "1/h"), the burst in the badge's title, and the due jobs over
it held; a full-access session clears it with "Clear limit" (no question),
a read-only one sees the badge but no button; cleared, the badge is gone
and the held jobs become ready."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

import harness
from conftest import PREFIX, READ_TOKEN, TOKEN, HttpServer, request
from test_dashboard import click, confirm, message, wait

TOPIC_PREFIX = "httpflowtopic:"

#: The topic's row on the overview, read in one go: its badges, its shown
#: buttons, whether it is marked paused (null while the row is not drawn).
ROW = """
const row = Array.from(document.querySelectorAll('#topics tbody tr')).find((r) => r.dataset.topic === arguments[0]);
if (!row) return null;
const shown = (e) => e.offsetParent !== null;
return {paused: row.dataset.paused,
        badges: Array.from(row.querySelectorAll('.badge')).map((b) => b.textContent),
        titles: Array.from(row.querySelectorAll('.badge')).map((b) => b.title),
        buttons: Array.from(row.querySelectorAll('button')).filter(shown).map((b) => b.textContent)};
"""


def row(driver: WebDriver, topic: str) -> Optional[Dict[str, Any]]:
    got: Optional[Dict[str, Any]] = driver.execute_script(ROW, topic)
    return got


def stats_of(server: HttpServer, topic: str, token: str = TOKEN) -> Dict[str, Any]:
    status, data, _ = request(server.base, "GET", "/v1/stats", token=token)
    assert status == 200, data
    mine = [t for t in data["topics"] if t["topic"] == topic]
    assert len(mine) == 1, data["topics"]
    return mine[0]


def push(server: HttpServer, topic: str, jobs: List[Dict[str, Any]]) -> None:
    status, data, _ = request(server.base, "POST", "/v1/jobs", {"jobs": [dict(j, topic=topic) for j in jobs]})
    assert status == 200, data


def state(server: HttpServer, topic: str, job_id: str) -> str:
    status, data, _ = request(server.base, "GET", f"/v1/topics/{topic}/jobs/{job_id}")
    assert status == 200, data
    return str(data["state"])


def sign_in_as(driver: WebDriver, server: HttpServer, token: str) -> None:
    """A fresh browser (the `browser` fixture): the sign-in form, then the app."""
    driver.get(server.base + "/")
    page = (By.CSS_SELECTOR, "#topics, input[name=token]")
    wait(driver, EC.presence_of_element_located(page), "the sign-in form or the app")
    if driver.find_elements(By.NAME, "token"):
        driver.find_element(By.NAME, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(driver, EC.presence_of_element_located((By.ID, "topics")), "the app page")


def paused_badge(r: Optional[Dict[str, Any]]) -> bool:
    return r is not None and r["paused"] == "true" and any(b.startswith("paused ") for b in r["badges"])


def pause_and_resume_by_the_buttons(driver: WebDriver, server: HttpServer, topic: str, flow_key: str,
                                    rds: Any) -> None:
    push(server, topic, [{"id": "later", "delay": 3600}])
    sign_in_as(driver, server, TOKEN)
    wait(driver, lambda d: (row(d, topic) or {}).get("buttons") == ["Pause"], "the topic's row, with Pause")
    assert row(driver, topic)["badges"] == [] and row(driver, topic)["paused"] == "false"
    pause = (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.pause')

    # Dismissing the question changes nothing.
    click(driver, pause, "Pause")
    assert topic in confirm(driver, accept=False)
    assert rds.hexists(flow_key, "paused") == 0 and stats_of(server, topic)["paused"] is False
    # Accepted: paused in Redis, the row says so, the page stayed on the overview.
    click(driver, pause, "Pause")
    question = confirm(driver)
    assert question.startswith(f"Pause {topic}?"), question
    message(driver, f"Paused {topic}.")
    assert rds.hexists(flow_key, "paused") == 1
    mine = stats_of(server, topic)
    assert mine["paused"] is True and isinstance(mine["paused_since"], (int, float)), mine
    wait(driver, lambda d: paused_badge(row(d, topic)) and row(d, topic)["buttons"] == ["Resume"], "the badge")
    assert "#/topics/" not in driver.current_url, "a button in the row is not a link to the topic"
    assert driver.find_element(By.ID, "message").get_attribute("class") == "ok"
    badge = row(driver, topic)["badges"][0]
    assert badge.endswith(" s") and float(badge.split()[1]) < 60, badge  # "paused 1.2 s": just now

    # Due jobs pushed now are held back: scheduled, counted, and shown.
    push(server, topic, [{"id": f"due{i}", "delay": 0} for i in range(3)])
    wait(driver, lambda d: "3 held" in (row(d, topic) or {}).get("badges", []), "3 held")
    assert stats_of(server, topic)["held"] == 3
    assert [state(server, topic, f"due{i}") for i in range(3)] == ["scheduled"] * 3
    # The topic's page says so beside its name.
    driver.get(server.base + f"/#/topics/{topic}/scheduled")
    flow = "return Array.from(document.querySelectorAll('#topic-flow .badge')).map((b) => b.textContent);"
    wait(driver, lambda d: len(d.execute_script(flow)) == 2 and d.execute_script(flow)[0].startswith("paused ")
         and d.execute_script(flow)[1] == "3 held", "the badges on the topic's page")
    driver.get(server.base + "/#/")
    wait(driver, lambda d: (row(d, topic) or {}).get("buttons") == ["Resume"], "the overview again")

    # Resume: no question; the badge, the flag and the hold are gone.
    click(driver, (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.resume'), "Resume")
    message(driver, f"Resumed {topic}.")
    assert rds.hexists(flow_key, "paused") == 0
    wait(driver, lambda d: (row(d, topic) or {}).get("buttons") == ["Pause"]
         and row(d, topic)["badges"] == [] and row(d, topic)["paused"] == "false", "the badge gone")
    assert harness.wait_until(lambda: all(state(server, topic, f"due{i}") == "ready" for i in range(3))), \
        "the held jobs never became ready"
    mine = stats_of(server, topic)
    assert (mine["paused"], mine["paused_since"], mine["held"], mine["ready"]) == (False, None, 0, 3), mine


def test_a_full_access_session_pauses_and_resumes_a_topic(server: HttpServer, redis_server: Any,
                                                          browser: WebDriver) -> None:
    topic = "sms-" + uuid.uuid4().hex[:6]
    rds = redis_server.client()
    try:
        pause_and_resume_by_the_buttons(browser, server, topic, f"{PREFIX}flow:{topic}", rds)
    finally:
        rds.close()


def test_pause_errors_are_shown_as_errors(server: HttpServer, redis_server: Any, browser: WebDriver) -> None:
    """A failing pause (the flow key of the wrong type: flow.lua's WRONGTYPE)
    is said in the message line, in red, in the server's words."""
    topic = "broken-" + uuid.uuid4().hex[:6]
    push(server, topic, [{"id": "later", "delay": 3600}])
    sign_in_as(browser, server, TOKEN)
    wait(browser, lambda d: (row(d, topic) or {}).get("buttons") == ["Pause"], "the topic's row")
    rds = redis_server.client()
    try:
        # Broken only after the row is drawn: the overview's stats may read the key too.
        rds.set(f"{PREFIX}flow:{topic}", "not a hash")
        click(browser, (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.pause'), "Pause")
        confirm(browser)
        wait(browser, lambda d: d.find_element(By.ID, "message").get_attribute("class") == "error"
             and d.find_element(By.ID, "message").text != "", "the error")
        assert "not a hash" in browser.find_element(By.ID, "message").text  # the server's own words
        assert rds.get(f"{PREFIX}flow:{topic}") == b"not a hash"
        # Redrawn as the stats say: a flow key of the wrong type fails closed
        # (paused, since no known time): the badge without a duration.
        wait(browser, lambda d: (row(d, topic) or {}).get("badges") == ["paused"]
             and row(d, topic)["buttons"] == ["Resume"], "the row, paused since no known time")
    finally:
        rds.delete(f"{PREFIX}flow:{topic}")
        rds.close()


def test_a_read_only_session_sees_the_badge_but_no_button(server: HttpServer, redis_server: Any,
                                                          browser: WebDriver) -> None:
    topic = "mail-" + uuid.uuid4().hex[:6]
    push(server, topic, [{"id": "later", "delay": 3600}])
    status, data, _ = request(server.base, "POST", f"/v1/topics/{topic}/pause")
    assert status == 200 and data["paused"] is True and data["changed"] is True, data
    sign_in_as(browser, server, READ_TOKEN)
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-access") == "read"
    wait(browser, lambda d: paused_badge(row(d, topic)), "the badge, read-only")
    assert row(browser, topic)["buttons"] == [], row(browser, topic)
    assert browser.find_elements(By.CSS_SELECTOR, "#topics button.pause, #topics button.resume") != [], \
        "drawn, hidden by the read-only style"
    # Forged: the dashboard's own headers, the read-only cookie: 403 for both.
    forged = ("const done = arguments[arguments.length - 1];"
              "fetch('/v1/topics/' + arguments[0] + '/' + arguments[1], {method: 'POST', credentials: 'same-origin',"
              " headers: {'x-delayer-dashboard': '1', 'content-type': 'application/json'}})"
              ".then((r) => done(r.status), (e) => done(String(e)));")
    assert browser.execute_async_script(forged, topic, "resume") == 403
    assert browser.execute_async_script(forged, topic, "pause") == 403
    # The button shown by hand (the page told it has full access): refused, said as an error.
    browser.execute_script("document.body.dataset.access = 'full';")
    click(browser, (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.resume'), "Resume, forged")
    wait(browser, lambda d: d.find_element(By.ID, "message").get_attribute("class") == "error"
         and d.find_element(By.ID, "message").text != "", "the refusal")
    assert stats_of(server, topic)["paused"] is True, "resumed by a read-only session"
    # A read-only token over the API: refused too.
    assert request(server.base, "POST", f"/v1/topics/{topic}/resume", token=READ_TOKEN)[0] == 403
    rds = redis_server.client()
    try:
        assert rds.hexists(f"{PREFIX}flow:{topic}", "paused") == 1
    finally:
        rds.close()
    assert request(server.base, "POST", f"/v1/topics/{topic}/resume")[0] == 200


def test_a_paused_topic_fits_400px(server: HttpServer, browser: WebDriver) -> None:
    topic = "narrow-" + "n" * 60 + uuid.uuid4().hex[:6]
    push(server, topic, [{"id": "later", "delay": 3600}])
    assert request(server.base, "POST", f"/v1/topics/{topic}/pause")[0] == 200
    push(server, topic, [{"id": f"due{i}", "delay": 0} for i in range(2)])
    browser.set_window_size(400, 900)
    try:
        sign_in_as(browser, server, TOKEN)
        wait(browser, lambda d: "2 held" in (row(d, topic) or {}).get("badges", []), "the held count")
        scroll, inner = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
        assert scroll <= inner, f"the overview scrolls sideways ({scroll} > {inner})"
        b = browser.find_element(By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.resume')
        assert b.is_displayed() and b.rect["x"] >= 0 and b.rect["x"] + b.rect["width"] <= 400, b.rect
        for badge in browser.find_elements(By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] .badge'):
            assert badge.rect["x"] >= 0 and badge.rect["x"] + badge.rect["width"] <= 400, badge.text
    finally:
        browser.set_window_size(1200, 1500)
        request(server.base, "POST", f"/v1/topics/{topic}/resume")


def limit(server: HttpServer, topic: str, per_second: float, burst: int) -> None:
    status, data, _ = request(server.base, "PUT", f"/v1/topics/{topic}/limit",
                              {"per_second": per_second, "burst": burst})
    assert status == 200 and data["rate_limit"] == {"per_second": per_second, "burst": burst}, data


def limited_topic_by_the_badges(driver: WebDriver, server: HttpServer, topic: str, flow_key: str, rds: Any) -> None:
    """A topic at one job an hour, burst 1: its badge "1/h", and of three due
    jobs two held (badge, title, the topic's page); cleared over the API: the
    badge gone, the held jobs ready."""
    push(server, topic, [{"id": "later", "delay": 3600}])
    limit(server, topic, 1 / 3600, 1)
    assert rds.hexists(flow_key, "per_second") == 1
    push(server, topic, [{"id": f"due{i}", "delay": 0} for i in range(3)])
    sign_in_as(driver, server, TOKEN)
    wait(driver, lambda d: (row(d, topic) or {}).get("badges") == ["1/h", "2 held"], "the limit and 2 held")
    mine = row(driver, topic)
    assert mine["titles"] == ["rate limit: 1 job/h, burst 1 (jobs over it wait, held)",
                              "due jobs over the rate limit: ready at its pace"], mine
    assert mine["buttons"] == ["Pause", "Clear limit"] and mine["paused"] == "false", mine
    assert stats_of(server, topic)["held"] == 2
    assert sorted(state(server, topic, f"due{i}") for i in range(3)) == ["ready", "scheduled", "scheduled"]
    # The topic's page says so beside its name.
    driver.get(server.base + f"/#/topics/{topic}/scheduled")
    flow = "return Array.from(document.querySelectorAll('#topic-flow .badge')).map((b) => b.textContent);"
    wait(driver, lambda d: d.execute_script(flow) == ["1/h", "2 held"], "the badges on the topic's page")
    driver.get(server.base + "/#/")
    # Cleared: no badge, no button; the held jobs go at full speed.
    status, data, _ = request(server.base, "DELETE", f"/v1/topics/{topic}/limit")
    assert status == 200 and data["cleared"] is True, data
    wait(driver, lambda d: (row(d, topic) or {}).get("badges") == [] and row(d, topic)["buttons"] == ["Pause"],
         "the badges gone")
    assert harness.wait_until(lambda: all(state(server, topic, f"due{i}") == "ready" for i in range(3))), \
        "the held jobs never became ready"
    mine = stats_of(server, topic)
    assert (mine["rate_limit"], mine["held"], mine["ready"]) == (None, 0, 3), mine
    assert rds.hexists(flow_key, "per_second") == 0


def test_a_limited_topic_shows_its_rate_and_held_jobs(server: HttpServer, redis_server: Any,
                                                      browser: WebDriver) -> None:
    topic = "gateway-" + uuid.uuid4().hex[:6]
    rds = redis_server.client()
    try:
        limited_topic_by_the_badges(browser, server, topic, f"{PREFIX}flow:{topic}", rds)
    finally:
        rds.close()


def test_a_full_access_session_clears_a_limit(server: HttpServer, browser: WebDriver) -> None:
    """0.5 a second reads "30/min"; "Clear limit" asks nothing and clears it;
    a paused and limited topic shows both badges and both buttons."""
    topic = "payments-" + uuid.uuid4().hex[:6]
    push(server, topic, [{"id": "later", "delay": 3600}])
    limit(server, topic, 0.5, 10)
    sign_in_as(browser, server, TOKEN)
    wait(browser, lambda d: (row(d, topic) or {}).get("badges") == ["30/min"], "the badge")
    mine = row(browser, topic)
    assert mine["titles"] == ["rate limit: 30 jobs/min, burst 10 (jobs over it wait, held)"], mine
    assert mine["buttons"] == ["Pause", "Clear limit"], mine
    limit(server, topic, 50, 10)
    wait(browser, lambda d: (row(d, topic) or {}).get("badges") == ["50/s"], "50/s")
    assert request(server.base, "POST", f"/v1/topics/{topic}/pause")[0] == 200
    wait(browser, lambda d: len((row(d, topic) or {}).get("badges", [])) == 2, "paused and limited")
    mine = row(browser, topic)
    assert mine["badges"][0].startswith("paused ") and mine["badges"][1] == "50/s", mine
    assert mine["buttons"] == ["Resume", "Clear limit"], mine
    click(browser, (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.unlimit'), "Clear limit")
    message(browser, f"Cleared the rate limit of {topic}.")
    wait(browser, lambda d: (row(d, topic) or {}).get("buttons") == ["Resume"]
         and paused_badge(row(d, topic)) and len(row(d, topic)["badges"]) == 1, "the limit gone, still paused")
    assert browser.find_element(By.ID, "message").get_attribute("class") == "ok"
    mine = stats_of(server, topic)
    assert mine["rate_limit"] is None and mine["paused"] is True, mine
    assert request(server.base, "POST", f"/v1/topics/{topic}/resume")[0] == 200


def test_a_read_only_session_sees_the_limit_but_no_button(server: HttpServer, browser: WebDriver) -> None:
    topic = "quota-" + uuid.uuid4().hex[:6]
    push(server, topic, [{"id": "later", "delay": 3600}])
    limit(server, topic, 2 / 60, 3)
    sign_in_as(browser, server, READ_TOKEN)
    wait(browser, lambda d: (row(d, topic) or {}).get("badges") == ["2/min"], "the badge, read-only")
    assert row(browser, topic)["buttons"] == [], row(browser, topic)
    assert browser.find_elements(By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.unlimit') != [], \
        "drawn, hidden by the read-only style"
    # The button shown by hand: refused, said as an error; the limit stays.
    browser.execute_script("document.body.dataset.access = 'full';")
    click(browser, (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] button.unlimit'), "Clear limit, forged")
    wait(browser, lambda d: d.find_element(By.ID, "message").get_attribute("class") == "error"
         and d.find_element(By.ID, "message").text != "", "the refusal")
    assert stats_of(server, topic)["rate_limit"] == {"per_second": 2 / 60, "burst": 3}
    assert request(server.base, "DELETE", f"/v1/topics/{topic}/limit", token=READ_TOKEN)[0] == 403
    assert request(server.base, "DELETE", f"/v1/topics/{topic}/limit")[0] == 200


@pytest.fixture(scope="module")
def topic_server(workdir: Path, redis_server: harness.RedisServer) -> Iterator[HttpServer]:
    s = HttpServer(workdir, redis_server, prefix=TOPIC_PREFIX, layout="topic", name="flow-topic")
    yield s
    s.stop()


def test_the_buttons_on_the_per_topic_layout(topic_server: HttpServer, redis_server: Any,
                                             browser: WebDriver) -> None:
    topic = "hooks-" + uuid.uuid4().hex[:6]
    rds = redis_server.client()
    try:
        pause_and_resume_by_the_buttons(browser, topic_server, topic, f"{TOPIC_PREFIX}{{{topic}}}:flow", rds)
        assert rds.exists(f"{TOPIC_PREFIX}flow:{topic}") == 0, "the classic layout's key"
    finally:
        rds.close()


def test_a_limited_topic_on_the_per_topic_layout(topic_server: HttpServer, redis_server: Any,
                                                 browser: WebDriver) -> None:
    topic = "gateway-" + uuid.uuid4().hex[:6]
    rds = redis_server.client()
    try:
        limited_topic_by_the_badges(browser, topic_server, topic, f"{TOPIC_PREFIX}{{{topic}}}:flow", rds)
    finally:
        rds.close()
