"""The conversation page's cache bar in headless Chromium: one segment per turn, coloured by
the cause its record gives, each one click from the element where its prompt parted."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from proxy.observability.audit.readers.sqlite import SqliteReader
from tests.browser.traffic import ADMIN_KEY, Traffic

pytestmark = pytest.mark.e2e


def wait(driver: Any, condition: Any) -> Any:
    retry = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, 10, ignored_exceptions=retry).until(condition)


@pytest.fixture(scope="module")
def conversation_page(browser: Any, traffic: Traffic) -> Any:
    """Signed in, on the agent conversation's page."""
    browser.get(f"{traffic.admin_origin}/requests/{traffic.conversation[-1]}")
    if browser.find_elements(By.ID, "key"):
        browser.find_element(By.ID, "key").send_keys(ADMIN_KEY + Keys.ENTER)
    wait(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith("Request"))
    browser.find_element(By.LINK_TEXT, "This conversation").click()
    wait(browser, lambda d: "/conversations/" in d.current_url)
    return browser


def causes(traffic: Traffic) -> list[dict[str, Any]]:
    reader = SqliteReader(str(traffic.db))
    try:
        return [reader.get(rid)["cache"] for rid in traffic.conversation]  # type: ignore[index]
    finally:
        reader.close()


def test_one_segment_per_turn_coloured_by_its_cause(
    conversation_page: Any, traffic: Traffic
) -> None:
    stored = causes(traffic)
    segments = conversation_page.find_elements(By.CSS_SELECTOR, "#cachebar li")
    assert [s.get_attribute("data-cause") for s in segments] == [c["cause"] for c in stored]
    assert stored[0]["cause"] == "first_turn"
    assert "curation" in {c["cause"] for c in stored}, "the agent's history gets cut"
    colour = {
        s.get_attribute("data-cause"): s.value_of_css_property("background-color") for s in segments
    }
    assert len(set(colour.values())) == len(colour), "each cause its own colour"
    legend = conversation_page.find_element(By.CSS_SELECTOR, "ul.legend").text
    assert "curation moved the prefix" in legend


def test_a_segment_opens_the_element_where_the_prompt_parted(
    conversation_page: Any, traffic: Traffic
) -> None:
    stored = causes(traffic)
    n = next(i for i, c in enumerate(stored) if c["cause"] == "curation")
    at = stored[n]["diverged_at"]
    segment = conversation_page.find_elements(By.CSS_SELECTOR, "#cachebar li a")[n]
    assert "curation moved the prefix" in segment.get_attribute("title")
    segment.click()
    anchor = f"#c{at['index']}"
    wait(conversation_page, lambda d: d.current_url.endswith(traffic.conversation[n] + anchor))
    target = conversation_page.find_element(By.CSS_SELECTOR, anchor)
    top = conversation_page.execute_script(
        "return arguments[0].getBoundingClientRect().top", target
    )
    assert 0 <= top < conversation_page.execute_script("return window.innerHeight")
