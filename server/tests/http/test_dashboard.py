"""The dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium) against the real server, one browser
for the whole module. Sign-in keeps a deep link; the overview, a topic's
tabs paged past 100 dead letters, a job's page with its body; every action
(run now, reschedule, remove, requeue, purge, bulk) after its confirmation;
search by id; hostile ids and bodies shown as text and round-tripping
through URLs; a read-only session without buttons; a 400 px window.
Screenshots of a failure go to target/test-artifacts/."""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterator, List

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

import harness
from browser import Browser
from conftest import PREFIX, READ_TOKEN, REPO, TOKEN, HttpServer, request

ARTIFACTS = REPO / "target" / "test-artifacts"
#: A body (and an id) that would run a script if the page ever parsed it as HTML.
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><b>bold</b>'


def api(server: HttpServer, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, data, _ = request(server.base, method, path, body)
    assert got == status, f"{method} {path}: {got} {data}"
    return data


def wait(driver: WebDriver, condition: Any, what: str) -> Any:
    # Views redraw: an element found a moment ago may be gone; look again.
    ignored = (StaleElementReferenceException, NoSuchElementException)
    try:
        return WebDriverWait(driver, harness.DEADLINE, poll_frequency=0.05, ignored_exceptions=ignored).until(condition)
    except Exception as e:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "dashboard-failure.png"))
        raise AssertionError(f"waiting for {what}: {e!r}") from e


def click(driver: WebDriver, locator: Any, what: str) -> None:
    def clicked(d: WebDriver) -> bool:
        d.find_element(*locator).click()
        return True
    wait(driver, clicked, what)


def confirm(driver: WebDriver, accept: bool = True) -> str:
    alert = wait(driver, EC.alert_is_present(), "the confirmation")
    text = alert.text
    alert.accept() if accept else alert.dismiss()
    return text


def message(driver: WebDriver, text: str) -> None:
    wait(driver, EC.text_to_be_present_in_element((By.ID, "message"), text), f"the message {text!r}")


def go(driver: WebDriver, server: HttpServer, hash_: str) -> None:
    driver.get(server.base + "/" + hash_)


def rows(driver: WebDriver) -> List[str]:
    """The ids in the topic page's list, read in one go."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#list tbody tr[data-id]')).map((r) => r.dataset.id);")


def seg(text: str) -> str:
    import urllib.parse
    return urllib.parse.quote(text, safe="")


def bury_by_hand(server: HttpServer, topic: str, ids: List[str], error: str) -> None:
    rds = server_redis(server)
    pipe = rds.pipeline()
    for i, job_id in enumerate(ids):
        pipe.hset(f"{PREFIX}job_bucket:{job_id}", mapping={
            "topic": topic, "body": json.dumps({"to": f"+4670000{i:04d}", "text": "Your table is ready"}),
            "attempts": 5, "dead_reason": "max_attempts", "dead_at": f"{1_760_000_000 + i}.000", "last_error": error})
        pipe.lpush(f"{PREFIX}dead:{topic}", job_id)
    pipe.execute()


_REDIS: Any = None


def server_redis(server: HttpServer) -> Any:
    return _REDIS


@pytest.fixture(scope="module")
def chromium(redis_server: Any) -> Iterator[WebDriver]:
    global _REDIS
    _REDIS = redis_server.client()
    b = Browser()
    try:
        yield b.driver
    finally:
        b.quit()


def test_sign_in_keeps_the_deep_link(server: HttpServer, chromium: WebDriver) -> None:
    topic = "orders-" + uuid.uuid4().hex[:6]
    api(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "order:42", "delay": 3600}, 201)
    go(chromium, server, f"#/topics/{topic}/scheduled")
    wait(chromium, EC.presence_of_element_located((By.NAME, "token")), "the sign-in form")
    chromium.find_element(By.NAME, "token").send_keys("not-the-token-at-all")
    chromium.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(chromium, EC.text_to_be_present_in_element((By.ID, "signin-error"), "not valid"), "the refusal")
    chromium.find_element(By.NAME, "token").send_keys(TOKEN)
    chromium.find_element(By.CSS_SELECTOR, "#signin button").click()
    # Signed in, on the view the link named.
    wait(chromium, lambda d: rows(d) == ["order:42"], "the topic's scheduled tab")
    assert chromium.current_url.endswith(f"/#/topics/{topic}/scheduled")
    assert TOKEN not in chromium.execute_script("return document.cookie")
    cookie = chromium.get_cookie("delayer_session")
    assert cookie is not None and cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"


def test_overview_counts_and_the_chart(server: HttpServer, chromium: WebDriver) -> None:
    topic = "mail-" + uuid.uuid4().hex[:6]
    api(server, "POST", "/v1/jobs", {"jobs": [{"topic": topic, "id": f"m{i}", "delay": i * 0.01} for i in range(120)]})
    go(chromium, server, "#/")
    cells = ("const row = Array.from(document.querySelectorAll('#topics tbody tr'))"
             ".find((r) => r.dataset.topic === arguments[0]);"
             "return row ? Array.from(row.cells).map((c) => c.textContent.replace(/^.*: /, '')) : null;")
    wait(chromium, lambda d: (d.execute_script(cells, topic) or [])[1:5] == ["0", "120", "0", "0"], "the counts")
    wait(chromium, lambda d: "moved in the last 120 s" in d.find_element(By.ID, "chart-summary").text, "the chart")
    # An hour: every server's 10 s samples, from Redis.
    chromium.execute_script("const r = document.getElementById('range'); r.value = '3600';"
                            "r.dispatchEvent(new Event('change'));")
    def an_hour(d: WebDriver) -> bool:
        summary = d.find_element(By.ID, "chart-summary").text
        return "moved in the last 1 h" in summary and int(summary.split()[0]) >= 120
    wait(chromium, an_hour, "the hour's moves, every 10 s, from Redis")
    # The ready tab, 50 a page by the API's cursor, to the end.
    go(chromium, server, f"#/topics/{topic}/ready")
    seen: List[str] = []
    for page in (50, 50, 20):
        wait(chromium, lambda d: len(rows(d)) == page and not set(rows(d)) & set(seen), f"a page of {page}")
        seen += rows(chromium)
        if page == 50:
            click(chromium, (By.ID, "page-next"), "Next")
    assert sorted(seen) == sorted(f"m{i}" for i in range(120)), "each ready job once"
    assert "cursor=100" in chromium.current_url and not chromium.find_element(By.ID, "page-next").is_displayed()
    click(chromium, (By.ID, "page-prev"), "Previous")
    wait(chromium, lambda d: d.current_url.endswith("cursor=50") and len(rows(d)) == 50, "the page before")


def test_a_job_page_shows_the_body_as_text_and_acts(server: HttpServer, chromium: WebDriver) -> None:
    topic = "reviews-" + uuid.uuid4().hex[:6]
    jobs = f"/v1/topics/{topic}/jobs"
    api(server, "POST", jobs, {"id": "r1", "delay": 3600, "body": '{"review": 7, "stars": [5, 4]}'}, 201)
    api(server, "POST", jobs, {"id": HOSTILE, "delay": 3600, "body": HOSTILE}, 201)
    # Found with the header's form, the topic given: the job's page.
    chromium.find_element(By.ID, "find-id").send_keys("r1")
    chromium.find_element(By.ID, "find-topic").send_keys(topic)
    chromium.find_element(By.CSS_SELECTOR, "#find button").click()
    wait(chromium, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "scheduled", "the job")
    assert chromium.current_url.endswith(f"#/jobs/{topic}/r1")
    body = chromium.find_element(By.ID, "job-body").text
    assert json.loads(body) == {"review": 7, "stars": [5, 4]} and "\n" in body, "pretty-printed JSON"
    # Reschedule: dismissing the confirmation does nothing, accepting does.
    due = api(server, "GET", f"{jobs}/r1")["due"]
    box = chromium.find_element(By.CSS_SELECTOR, "#job-actions input.delay")
    box.send_keys("7200")
    chromium.find_element(By.CSS_SELECTOR, "#job-actions button.reschedule").click()
    assert "7200" in confirm(chromium, accept=False)
    assert api(server, "GET", f"{jobs}/r1")["due"] == due
    chromium.find_element(By.CSS_SELECTOR, "#job-actions button.reschedule").click()
    confirm(chromium)
    message(chromium, "Rescheduled r1")
    assert api(server, "GET", f"{jobs}/r1")["due"] > due + 3000
    # Run now: due at once, then moved to ready.
    click(chromium, (By.CSS_SELECTOR, "#job-actions button.run"), "Run now")
    confirm(chromium)
    message(chromium, "Running r1 now.")
    assert harness.wait_until(lambda: api(server, "GET", f"{jobs}/r1")["state"] == "ready")
    # Remove, from the ready state.
    chromium.refresh()
    wait(chromium, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "ready", "ready")
    click(chromium, (By.CSS_SELECTOR, "#job-actions button.remove"), "Remove")
    confirm(chromium)
    message(chromium, "Removed r1.")
    assert api(server, "GET", f"{jobs}/r1")["state"] == "unknown"

    # The hostile id: its own URL round-trips, its id and body shown as text.
    go(chromium, server, f"#/jobs/{seg(topic)}/{seg(HOSTILE)}")
    wait(chromium, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "scheduled", "the hostile job")
    assert chromium.find_element(By.ID, "job-body").text == HOSTILE
    assert HOSTILE in chromium.find_element(By.ID, "job").text
    assert chromium.find_elements(By.CSS_SELECTOR, "main img, main b") == [] and chromium.title != "pwned"
    # Its row in the list links to the same page.
    go(chromium, server, f"#/topics/{seg(topic)}/scheduled")
    wait(chromium, lambda d: rows(d) == [HOSTILE], "the listing")
    chromium.find_element(By.CSS_SELECTOR, "#list a.id").click()
    wait(chromium, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "scheduled", "the link")
    assert chromium.find_element(By.ID, "job-body").text == HOSTILE
    # Search by id alone: the one topic holding it opens.
    chromium.find_element(By.ID, "find-topic").clear()
    chromium.find_element(By.ID, "find-id").clear()
    chromium.find_element(By.ID, "find-id").send_keys(HOSTILE)
    chromium.find_element(By.CSS_SELECTOR, "#find button").click()
    wait(chromium, lambda d: d.current_url.endswith(f"#/jobs/{seg(topic)}/{seg(HOSTILE)}"), "the search")
    # A hash naming other segments cannot leave its own: "a/b" stays one id.
    go(chromium, server, f"#/jobs/{seg(topic)}/a%2Fb%3F%23x")
    wait(chromium, lambda d: d.find_element(By.ID, "job").get_attribute("data-state") == "unknown", "a/b?#x")
    assert "a/b?#x" in chromium.find_element(By.ID, "job-title").text


def test_why_did_it_die_and_run_it_again_in_three_clicks(server: HttpServer, chromium: WebDriver) -> None:
    topic = "sms-" + uuid.uuid4().hex[:6]
    jobs = f"/v1/topics/{topic}/jobs"
    api(server, "POST", jobs, {"id": "sms:9", "delay": 0, "body": "{}"}, 201)
    got = api(server, "POST", f"/v1/topics/{topic}/reserve", {"ttr": 30, "wait": 10})["job"]
    api(server, "POST", f"{jobs}/sms:9/bury", {"receipt": got["receipt"], "error": "gateway: invalid number"})
    go(chromium, server, "#/")
    dead_count = (By.CSS_SELECTOR, f'#topics tr[data-topic="{topic}"] td:nth-child(5) a')
    click(chromium, dead_count, "click 1: the topic's dead count")
    wait(chromium, lambda d: rows(d) == ["sms:9"], "the dead tab")
    assert "gateway: invalid number" in chromium.find_element(By.CSS_SELECTOR, '#list tr[data-id="sms:9"]').text
    click(chromium, (By.CSS_SELECTOR, '#list tr[data-id="sms:9"] button.requeue'), "click 2: Requeue")
    confirm(chromium)  # click 3
    message(chromium, "Requeued 1.")
    assert api(server, "GET", f"{jobs}/sms:9")["state"] in ("scheduled", "ready")


def test_dead_letters_paged_past_100_and_bulk_actions(server: HttpServer, chromium: WebDriver) -> None:
    topic = "close-" + uuid.uuid4().hex[:6]
    ids = [f"d{i:03d}" for i in range(130)]
    bury_by_hand(server, topic, ids, "timeout after 30 s")
    go(chromium, server, f"#/topics/{topic}/dead")
    wait(chromium, lambda d: len(rows(d)) == 50, "page 1")
    assert "page 1 of 3 (130 dead letters)" in chromium.find_element(By.ID, "page-info").text
    assert rows(chromium)[0] == "d129", "newest first"
    click(chromium, (By.ID, "page-next"), "Next")
    wait(chromium, lambda d: rows(d)[:1] == ["d079"], "page 2")
    assert chromium.current_url.endswith(f"#/topics/{topic}/dead?page=2")
    # A deep link to the last page: the 30 oldest.
    go(chromium, server, f"#/topics/{topic}/dead?page=3")
    wait(chromium, lambda d: rows(d) == [f"d{i:03d}" for i in range(29, -1, -1)], "page 3")
    assert chromium.find_element(By.ID, "page-next").is_displayed() is False
    # Bulk: two selected, requeued; dismissing the confirmation does nothing.
    for job_id in ("d000", "d001"):
        chromium.find_element(By.CSS_SELECTOR, f'#list tr[data-id="{job_id}"] input.select').click()
    click(chromium, (By.ID, "requeue-selected"), "Requeue selected")
    assert "2 dead letters" in confirm(chromium, accept=False)
    assert api(server, "GET", f"/v1/topics/{topic}/dead?count=1")["total"] == 130
    click(chromium, (By.ID, "requeue-selected"), "Requeue selected")
    confirm(chromium)
    message(chromium, "Requeued 2.")
    wait(chromium, lambda d: "d000" not in rows(d) and len(rows(d)) == 28, "the two gone")
    # Purge one, then all the rest.
    click(chromium, (By.CSS_SELECTOR, '#list tr[data-id="d002"] button.purge'), "Purge")
    confirm(chromium)
    message(chromium, "Purged 1.")
    click(chromium, (By.ID, "purge-all"), "Purge all")
    confirm(chromium)
    message(chromium, "Purged 127.")
    assert api(server, "GET", f"/v1/topics/{topic}/dead")["total"] == 0


def test_a_read_only_session_sees_no_buttons_and_400px_fits(server: HttpServer, chromium: WebDriver) -> None:
    topic = "narrow-" + uuid.uuid4().hex[:6]
    bury_by_hand(server, topic, ["x1", "x2"], "a rather long error message " * 5)
    api(server, "POST", f"/v1/topics/{topic}/jobs", {"id": "w" * 120, "delay": 600, "body": "x" * 3000}, 201)
    chromium.set_window_size(400, 900)
    try:
        width = "return [document.documentElement.scrollWidth, window.innerWidth];"
        for hash_ in ["#/", f"#/topics/{topic}/dead", f"#/topics/{topic}/scheduled", f"#/jobs/{topic}/{'w' * 120}"]:
            go(chromium, server, hash_)
            wait(chromium, lambda d: d.find_element(By.ID, "status").text != "", hash_)
            drawn = "return document.querySelectorAll('#list tbody tr, #job dt, #topics tbody tr').length"
            wait(chromium, lambda d: d.execute_script(drawn) > 0, hash_)
            scroll, inner = chromium.execute_script(width)
            assert scroll <= inner, f"{hash_}: the page scrolls sideways ({scroll} > {inner})"
        # Every action in reach: shown, inside the window.
        go(chromium, server, f"#/topics/{topic}/dead")
        wait(chromium, lambda d: len(rows(d)) == 2, "the dead letters")
        for b in chromium.find_elements(By.CSS_SELECTOR, "#list button, #bulk button"):
            assert b.is_displayed() and b.rect["x"] >= 0 and b.rect["x"] + b.rect["width"] <= 400, b.text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chromium.save_screenshot(str(ARTIFACTS / "dashboard-400px.png"))
    finally:
        chromium.set_window_size(1200, 1500)
    # Read-only: no action buttons; the server refuses a write anyway.
    chromium.find_element(By.ID, "signout").click()
    wait(chromium, EC.presence_of_element_located((By.NAME, "token")), "signed out")
    chromium.find_element(By.NAME, "token").send_keys(READ_TOKEN)
    chromium.find_element(By.CSS_SELECTOR, "#signin button").click()
    # The sign-in's answer first: navigating away at once could cancel it.
    wait(chromium, EC.presence_of_element_located((By.ID, "topics")), "signed in, read-only")
    go(chromium, server, f"#/topics/{topic}/dead")
    wait(chromium, lambda d: len(rows(d)) == 2, "the dead letters, read-only")
    shown = [b.text for b in chromium.find_elements(By.CSS_SELECTOR, "#list button, #bulk button, #job-actions button")
             if b.is_displayed()]
    assert shown == [], shown
    refused = chromium.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "api('POST', '/v1/topics/' + arguments[0] + '/dead/purge', {all: true})"
        ".then(() => done('done'), (e) => done(e.message));",
        topic)
    assert refused != "done", refused
    assert api(server, "GET", f"/v1/topics/{topic}/dead")["total"] == 2
    # Back to full access for the module's other tests.
    chromium.find_element(By.ID, "signout").click()
    wait(chromium, EC.presence_of_element_located((By.NAME, "token")), "signed out")
    chromium.find_element(By.NAME, "token").send_keys(TOKEN)
    chromium.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(chromium, EC.presence_of_element_located((By.ID, "topics")), "signed in")
