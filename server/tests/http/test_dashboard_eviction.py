"""The dashboard's warning about a Redis that may evict keys (jobs with
them): a banner on top while Redis's maxmemory-policy is not noeviction,
none when it is. Headless Chromium against the real server, as
test_dashboard.py."""

from __future__ import annotations

from pathlib import Path

import harness
import redis as redis_py
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as EC

from conftest import TOKEN, HttpServer
from test_dashboard import wait


def sign_in(driver: WebDriver, server: HttpServer) -> None:
    # Cookies are per host, not per port: a second server on 127.0.0.1 with
    # the same token finds the browser signed in already.
    driver.get(server.base + "/")
    page = (By.CSS_SELECTOR, "#topics, input[name=token]")
    wait(driver, EC.presence_of_element_located(page), "the sign-in form or the app")
    if driver.find_elements(By.NAME, "token"):
        driver.find_element(By.NAME, "token").send_keys(TOKEN)
        driver.find_element(By.CSS_SELECTOR, "#signin button").click()
    wait(driver, EC.presence_of_element_located((By.ID, "topics")), "the app page")


def test_an_evicting_redis_shows_a_banner(
    workdir: Path, redis_server: harness.RedisServer, server: HttpServer, browser: WebDriver
) -> None:
    # The session's server runs on noeviction: no banner once the numbers show.
    sign_in(browser, server)
    wait(browser, lambda d: d.find_element(By.ID, "status").text != "", "the first refresh")
    assert not browser.find_element(By.ID, "eviction").is_displayed()

    admin = redis_py.Redis(host="127.0.0.1", port=redis_server.port)
    admin.config_set("maxmemory-policy", "allkeys-lru")
    evicting = None
    try:
        # A server started now reads the policy at its first connection.
        evicting = HttpServer(workdir / "evicting", redis_server, prefix="evicting:")
        sign_in(browser, evicting)
        banner = wait(browser, EC.visibility_of_element_located((By.ID, "eviction")), "the eviction banner")
        assert "allkeys-lru" in banner.text and "noeviction" in banner.text, banner.text
    finally:
        if evicting is not None:
            evicting.stop()
        admin.config_set("maxmemory-policy", "noeviction")
