"""One headless Chromium (Debian's `chromium` and `chromium-driver`, driven by selenium) for
the whole browser suite, against a store filled by real proxied traffic (`traffic.py`).

Selenium is pointed at the system chromedriver, so its driver manager never downloads
anything. Without the browser installed the suite is skipped; `.ci/run` installs it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.traffic import MODEL, WINDOW, Traffic, proxied_traffic
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WIDTH, HEIGHT = 1400, 1000

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (.ci/run)"
)


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(windows={MODEL: WINDOW, "gpt-4o": 128_000, "gpt-4o-mini": 128_000})
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture(scope="session")
def traffic(fake_server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    with proxied_traffic(tmp_path_factory.mktemp("viewer"), fake_server, keys=True) as filled:
        yield filled


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
        f"--window-size={WIDTH},{HEIGHT}", "--force-prefers-reduced-motion",
        "--disable-extensions", "--no-first-run", "--disable-background-networking",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")
