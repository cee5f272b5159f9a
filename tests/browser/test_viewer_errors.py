"""The viewer's error pages in headless Chromium, served by the real admin listener over a real
PostgreSQL store: the database down is a 503 page in the viewer's own layout (its stylesheet
still served, its navigation there), a NUL byte in a filter a 400 page, a bug a 500 page that
shows the request id the log names."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.serving.admin import admin_listener
from proxy.viewer.app import OpenReader, Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener
from tests.browser.conftest import CHROMIUM, DRIVER
from tests.postgres import PgServer
from tests.proxy.viewer.records import entries

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs chromium and chromium-driver"),
]
START_S = 10.0


@contextmanager
def admin_thread(open_reader: OpenReader) -> Iterator[str]:
    """The admin listener serving a viewer over `open_reader`, in a thread; yields its origin."""
    started = threading.Event()
    box: dict[str, Any] = {}

    async def run() -> None:
        stop = asyncio.Event()
        box["stop"] = (asyncio.get_running_loop(), stop)
        viewer = Viewer(open_reader, AdminKeys(()))
        async with admin_listener("127.0.0.1", 0, "/metrics", None, viewer=viewer) as server:
            box["port"] = server.sockets[0].getsockname()[1]
            started.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    assert started.wait(START_S)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        loop, stop = box["stop"]
        loop.call_soon_threadsafe(stop.set)
        thread.join(START_S)


@pytest.fixture
def pg_origin(fresh_dsn: str) -> Iterator[str]:
    builder = RecordBuilder(Redactor.build())
    sink = PostgresSink(fresh_dsn)
    sink.write_many([builder.build(e) for e in entries()])
    sink.close()
    with admin_thread(opener(fresh_dsn)) as origin:
        yield origin


def heading(browser: Any) -> str:
    return str(browser.find_element(By.TAG_NAME, "h1").text)


def styled(browser: Any) -> bool:
    """Whether the viewer's stylesheet reached the page (its rules are in the CSSOM)."""
    return bool(
        browser.execute_script(
            "return [...document.styleSheets].some(s => s.href && s.href.endsWith("
            "'/static/viewer.css') && s.cssRules.length > 0)"
        )
    )


def test_the_database_down_is_a_503_page_in_the_viewers_layout(
    browser: Any, pg_origin: str, pg_server: PgServer
) -> None:
    browser.get(pg_origin + "/requests")
    assert heading(browser) == "Requests"  # the store up: the list
    pg_server.stop()
    try:
        for path in ("/requests", "/requests/a000000000", "/overview"):
            browser.get(pg_origin + path)
            assert heading(browser) == "The audit store is unavailable", path
            assert browser.title.startswith("Store unavailable")
            assert "postgres:" in browser.find_element(By.ID, "main").text
            assert styled(browser)
            nav = browser.find_elements(By.CSS_SELECTOR, "nav[aria-label=Main] a")
            assert [a.text for a in nav] == ["Requests", "Overview"]
    finally:
        pg_server.start()
    browser.get(pg_origin + "/requests/a000000000")
    assert heading(browser).startswith("Request")  # back: served again


def test_a_nul_byte_in_a_filter_is_a_400_page(browser: Any, pg_origin: str) -> None:
    browser.get(pg_origin + "/requests?route=agents%00")
    assert heading(browser) == "Bad request"
    assert "NUL" in browser.find_element(By.ID, "main").text
    assert styled(browser)


def test_a_bug_is_a_500_page_showing_the_request_id(browser: Any) -> None:
    def broken() -> Any:
        raise RuntimeError("a reader bug")

    with admin_thread(broken) as origin:
        browser.get(origin + "/requests")
        assert heading(browser) == "Internal error"
        rid = browser.find_element(By.CSS_SELECTOR, "#main code").text
        assert len(rid) == 32
        assert int(rid, 16) >= 0
        assert styled(browser)
