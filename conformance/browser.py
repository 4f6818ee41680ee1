"""Headless Chromium for the tests that read the dashboard in a real browser
(server/tests/http/test_dashboard.py and conformance/dashboard_view.py): one
place for the flags, the throw-away profile and where the driver is, so both
start the browser the same way.

Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package
are installed by tools/install-deps.sh; a missing one is an error, never a
skip (CI installs them).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Optional

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

#: Quiet, headless, no sandbox (tests may run as root), nothing fetched from the network.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1200,1500"]


class MissingTool(RuntimeError):
    """chromium or chromedriver is not installed."""


def find(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingTool(f"{name} is not installed: run tools/install-deps.sh "
                          "(apt-get install chromium chromium-driver)")
    return path


class Browser:
    """A headless Chromium with a profile of its own, removed on :meth:`quit`."""

    def __init__(self) -> None:
        self.profile: Optional[str] = tempfile.mkdtemp(prefix="delayer-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = find("chromium")
        for arg in FLAGS + [f"--user-data-dir={self.profile}"]:
            options.add_argument(arg)
        try:
            self.driver: WebDriver = webdriver.Chrome(service=Service(find("chromedriver")), options=options)
        except BaseException:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise

    def quit(self) -> None:
        if self.profile is None:
            return
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None
