"""The audit viewer in headless Chromium, as a new user meets it: sign in with the admin key,
list requests, filter, open a curated request side by side, follow a conversation, read
the overview, move with the keyboard, switch the theme. Layout is compared structurally
(landmarks, headings, element boxes), never by pixels."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.browser.conftest import HEIGHT, WIDTH
from tests.browser.traffic import ADMIN_KEY, SCRIPT, SECRET, Traffic

pytestmark = pytest.mark.e2e
WAIT_S = 10
README_SHOT = Path(__file__).parents[2] / "docs" / "viewer-request.png"
"""Rewritten when CURATOR_UPDATE_SCREENSHOTS=1 (docs/audit.md shows it)."""


def wait(driver: Any, condition: Any) -> Any:
    """Until `condition` holds; an element the page replaced while it was read (a navigation
    between finding it and reading its text) just means "look again"."""
    retry = (StaleElementReferenceException, NoSuchElementException)
    return WebDriverWait(driver, WAIT_S, ignored_exceptions=retry).until(condition)


def rows(driver: Any) -> list[str]:
    return [
        r.get_attribute("data-id")
        for r in driver.find_elements(By.CSS_SELECTOR, "#requests tbody tr")
    ]


def active(driver: Any) -> Any:
    return driver.switch_to.active_element


@pytest.fixture(scope="module")
def signed_in(browser: Any, traffic: Traffic) -> Any:
    """Opens a deep link, meets the sign-in form, signs in, and lands on the link."""
    target = f"{traffic.admin_origin}/requests/{traffic.ids['curated'][:24]}"
    browser.get(target)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sign in"
    assert traffic.ids["curated"] not in browser.page_source
    key = browser.find_element(By.ID, "key")
    key.send_keys("wrong key")
    key.submit()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "p.error[role=alert]"))
    browser.find_element(By.ID, "key").send_keys(ADMIN_KEY + Keys.ENTER)
    wait(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith("Request"))
    cookie = browser.get_cookie("curator_admin")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    return browser


def test_requests_list_is_newest_first_and_complete(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(traffic.admin_origin + "/requests")
    shown = rows(signed_in)
    for rid in (*traffic.ids.values(), *traffic.conversation):
        assert rid in shown
    assert shown.index(traffic.ids["failed"]) < shown.index(traffic.conversation[0])
    curated = signed_in.find_element(By.CSS_SELECTOR, f'tr[data-id="{traffic.ids["curated"]}"]')
    cells = [c.text for c in curated.find_elements(By.TAG_NAME, "td")]
    assert re.fullmatch(r"[\d,]+ → [\d,]+ \u2212\d+%", cells[5]), cells
    assert "tool_result_truncation" in cells[7]
    failed = signed_in.find_element(By.CSS_SELECTOR, f'tr[data-id="{traffic.ids["failed"]}"]')
    assert failed.find_elements(By.TAG_NAME, "td")[-1].text == "429"


def test_filters_narrow_the_list(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(traffic.admin_origin + "/requests")
    Select(signed_in.find_element(By.NAME, "kind")).select_by_value("summarizer")
    signed_in.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    wait(signed_in, lambda d: "kind=summarizer" in d.current_url)
    summaries = rows(signed_in)
    assert summaries
    assert all(
        c.text == "summarizer"
        for c in signed_in.find_elements(By.CSS_SELECTOR, "#requests tbody td:nth-child(3)")
    )
    signed_in.find_element(By.LINK_TEXT, "Clear").click()
    search = wait(signed_in, lambda d: d.find_element(By.NAME, "q"))
    search.send_keys("onerror" + Keys.ENTER)
    wait(signed_in, lambda d: "q=onerror" in d.current_url)
    assert rows(signed_in) == [traffic.ids["script"]]
    Select(signed_in.find_element(By.NAME, "status")).select_by_value("429")
    signed_in.find_element(By.NAME, "q").clear()
    signed_in.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    wait(signed_in, lambda d: "status=429" in d.current_url)
    assert rows(signed_in) == [traffic.ids["failed"]]


def test_side_by_side_shows_what_changed_and_why(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['curated']}")
    heads = [h.text for h in signed_in.find_elements(By.CSS_SELECTOR, "table.sbs thead th")]
    assert heads[0].startswith("Original: what the client sent")
    assert heads[1].startswith("Curated: what the upstream got")
    changed = signed_in.find_elements(By.CSS_SELECTOR, "table.sbs tr.changed")
    assert changed, "the last turn's old tool results were truncated"
    left, right = changed[0].find_elements(By.TAG_NAME, "td")
    assert "tool_result_truncation" in left.text
    assert "chars cut" in left.text
    mark = right.find_element(By.CSS_SELECTOR, "mark.placeholder")
    assert "truncated" in mark.text
    # Kept head and tail surround the cut on both sides.
    assert "/file_0.py:0: def handler_0" in right.text
    assert "handler_159" in right.text
    cut = left.find_element(By.CSS_SELECTOR, "details.cut")
    assert cut.get_attribute("open") is None
    cut.find_element(By.TAG_NAME, "summary").click()
    assert cut.get_attribute("open") is not None
    same = signed_in.find_elements(By.CSS_SELECTOR, "table.sbs tr.same")
    assert same[0].is_displayed()
    signed_in.find_element(By.ID, "only-changes").click()
    assert not same[0].is_displayed()
    assert changed[0].is_displayed()
    assert "[REDACTED:openai_key]" in signed_in.page_source
    assert SECRET not in signed_in.page_source


def test_summary_links_to_the_messages_it_replaced_which_are_struck_through(
    signed_in: Any, traffic: Traffic
) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['summary_parent']}")
    inserted = signed_in.find_element(By.CSS_SELECTOR, "table.sbs tr.inserted")
    assert "summary" in inserted.find_element(By.CSS_SELECTOR, ".badge.ins").text
    links = inserted.find_elements(By.CSS_SELECTOR, "p.replaces a")
    assert links
    links[0].click()
    assert signed_in.current_url.endswith(links[0].get_attribute("hash"))
    assert signed_in.find_element(By.ID, links[0].get_attribute("hash")[1:]).is_displayed()
    dropped = signed_in.find_elements(By.CSS_SELECTOR, "table.sbs tr.dropped details.dropped")
    assert dropped, "the summarizer replaced the oldest turns"
    summary = dropped[0].find_element(By.TAG_NAME, "summary")
    decoration = signed_in.execute_script(
        "return getComputedStyle(arguments[0].querySelector('.role')).textDecorationLine", summary
    )
    assert "line-through" in decoration
    assert not dropped[0].find_element(By.TAG_NAME, "del").is_displayed()
    summary.click()
    assert dropped[0].find_element(By.TAG_NAME, "del").is_displayed()


def test_script_in_a_message_is_shown_as_text(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['script']}")
    assert signed_in.execute_script("return window.__pwned === undefined")
    texts = [t.text for t in signed_in.find_elements(By.CSS_SELECTOR, "table.sbs .text")]
    assert SCRIPT in texts
    assert not signed_in.find_elements(By.CSS_SELECTOR, "main img, main script")


def test_raw_json_is_one_click_away(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['first']}")
    signed_in.find_element(By.ID, "raw-json").click()
    wait(signed_in, lambda d: d.current_url.endswith(".json"))
    assert f'"id": "{traffic.ids["first"]}"' in signed_in.find_element(By.TAG_NAME, "body").text


def test_conversation_orders_turns_and_charts_tokens(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['curated']}")
    signed_in.find_element(By.LINK_TEXT, "This conversation").click()
    wait(signed_in, lambda d: "/conversations/" in d.current_url)
    links = signed_in.find_elements(By.CSS_SELECTOR, "#turns a.rowlink")
    hrefs = [a.get_attribute("href").rsplit("/", 1)[1] for a in links]
    assert hrefs == traffic.conversation
    bars = signed_in.find_elements(By.CSS_SELECTOR, "figure.chart rect.after")
    assert len(bars) == len(traffic.conversation)
    heights = [float(b.get_attribute("height")) for b in signed_in.find_elements(
        By.CSS_SELECTOR, "figure.chart rect.before")]  # fmt: skip
    assert heights == sorted(heights), "the history grows every turn"


def test_overview_counts_the_traffic(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(traffic.admin_origin + "/overview")
    cards = {
        c.find_element(By.CLASS_NAME, "label").text: c.find_element(By.CLASS_NAME, "value").text
        for c in signed_in.find_elements(By.CSS_SELECTOR, ".cards .card")
    }
    total = len(set(traffic.ids.values()) | set(traffic.conversation))
    assert int(cards["Requests"]) >= total
    assert cards["Errors"] == "2", "the 429, and the rescued attempt the upstream refused"
    assert not cards["Tokens saved"].startswith("0 ")
    routes = [th.text for th in signed_in.find_elements(By.CSS_SELECTOR, "section th[scope=row]")]
    assert "default" in routes
    assert "agent" in routes


def test_keyboard_navigation(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(traffic.admin_origin + "/requests")
    body = signed_in.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    assert active(signed_in).text == "Skip to content"
    active(signed_in).send_keys(Keys.ENTER)
    assert active(signed_in).get_attribute("id") == "main"
    active(signed_in).send_keys("j")
    first = active(signed_in)
    assert first.get_attribute("class") == "rowlink"
    active(signed_in).send_keys("j")
    second = active(signed_in)
    assert second.get_attribute("href") != first.get_attribute("href")
    active(signed_in).send_keys("k")
    assert active(signed_in).get_attribute("href") == first.get_attribute("href")
    target = first.get_attribute("href")
    active(signed_in).send_keys(Keys.ENTER)
    wait(signed_in, lambda d: d.current_url == target)
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['curated']}")
    signed_in.find_element(By.TAG_NAME, "body").send_keys("j")
    assert active(signed_in).tag_name == "tr"
    assert active(signed_in).get_attribute("class").split()[0] in ("changed", "dropped")
    signed_in.find_element(By.TAG_NAME, "body").send_keys("/")  # no search box here: no-op


def test_theme_toggle_and_contrast(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(traffic.admin_origin + "/requests")
    signed_in.execute_script("localStorage.removeItem('curator-theme')")
    signed_in.refresh()
    light = background(signed_in)
    signed_in.find_element(By.ID, "theme-toggle").click()
    assert signed_in.execute_script("return document.documentElement.dataset.theme") == "dark"
    dark = background(signed_in)
    assert luminance(dark) < 0.1 < luminance(light)
    signed_in.refresh()
    assert background(signed_in) == dark, "the choice persists"
    for selector in ("main", "a.rowlink", ".status.bad", ".muted", "thead th"):
        check_contrast(signed_in, selector)
    signed_in.find_element(By.ID, "theme-toggle").click()
    for selector in ("main", "a.rowlink", ".status.bad", ".muted", "thead th"):
        check_contrast(signed_in, selector)


def test_request_page_structure(signed_in: Any, traffic: Traffic, screenshots: Path) -> None:
    """Landmarks, headings and boxes of the request page: the two sides sit side by side,
    of equal width, under the header; the screenshot is the window's size."""
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['curated']}")
    outline = signed_in.execute_script(
        "return Array.from(document.querySelectorAll('header, nav, main, footer, h1, h2'))"
        ".map(e => e.tagName.toLowerCase() + (e.tagName[0] === 'H' && e.tagName.length === 2"
        " ? ':' + e.textContent.split(' ')[0] : ''))"
    )
    assert outline == [
        "header", "nav", "main", "h1:Request", "h2:What", "h2:Messages", "h2:Response", "footer",
    ]  # fmt: skip
    header = box(signed_in, "header.top")
    main = box(signed_in, "main")
    assert header["bottom"] <= main["top"]
    left = box(signed_in, "table.sbs thead th:nth-child(1)")
    right = box(signed_in, "table.sbs thead th:nth-child(2)")
    assert left["top"] == right["top"]
    assert left["right"] <= right["left"] + 1
    assert abs(left["width"] - right["width"]) <= 2
    row = signed_in.find_element(By.CSS_SELECTOR, "table.sbs tr.changed")
    cells = row.find_elements(By.TAG_NAME, "td")
    assert cells[0].rect["y"] == cells[1].rect["y"]
    png = signed_in.get_screenshot_as_png()
    assert png_size(png) == (WIDTH, signed_in.execute_script("return window.innerHeight"))
    (screenshots / "request.png").write_bytes(png)
    if os.environ.get("CURATOR_UPDATE_SCREENSHOTS") == "1":
        signed_in.set_window_size(1200, 1000)
        signed_in.execute_script("document.getElementById('msgs-h').scrollIntoView()")
        README_SHOT.write_bytes(signed_in.get_screenshot_as_png())
        signed_in.set_window_size(WIDTH, HEIGHT)


def box(driver: Any, selector: str) -> dict[str, float]:
    return driver.execute_script(  # type: ignore[no-any-return]
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width};",
        selector,
    )


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def background(driver: Any) -> tuple[int, ...]:
    return rgb(driver.execute_script("return getComputedStyle(document.body).backgroundColor"))


def rgb(css: str) -> tuple[int, ...]:
    return tuple(int(float(x)) for x in re.findall(r"[\d.]+", css)[:3])


def luminance(color: tuple[int, ...]) -> float:
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def check_contrast(driver: Any, selector: str) -> None:
    """WCAG AA: 4.5:1 between an element's text and the background behind it."""
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    if not found:
        return
    fg, bg = driver.execute_script(
        "let e = arguments[0]; const fg = getComputedStyle(e).color;"
        "const clear = 'rgba(0, 0, 0, 0)';"
        "while (e && getComputedStyle(e).backgroundColor === clear) e = e.parentElement;"
        "return [fg, e ? getComputedStyle(e).backgroundColor : 'rgb(255, 255, 255)'];",
        found[0],
    )
    a, b = sorted((luminance(rgb(fg)), luminance(rgb(bg))))
    assert (b + 0.05) / (a + 0.05) >= 4.5, (selector, fg, bg)


def test_two_runs_of_one_task_are_two_conversations(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.second_run[-1]}")
    signed_in.find_element(By.LINK_TEXT, "This conversation").click()
    wait(signed_in, lambda d: "/conversations/" in d.current_url)
    links = signed_in.find_elements(By.CSS_SELECTOR, "#turns a.rowlink")
    shown = [a.get_attribute("href").rsplit("/", 1)[1] for a in links]
    assert traffic.second_run[0] == shown[0]
    assert not set(shown) & set(traffic.conversation)
    assert traffic.second_run[-1] in shown


def test_a_rescued_attempt_and_its_request_link_each_other(
    signed_in: Any, traffic: Traffic
) -> None:
    parent = traffic.ids["rescued_parent"]
    signed_in.get(f"{traffic.admin_origin}/requests/{parent}")
    child = signed_in.find_element(By.CSS_SELECTOR, "#children a")
    assert child.text.startswith("rescued attempt")
    child.click()
    wait(signed_in, lambda d: parent not in d.current_url)
    label = signed_in.find_element(By.ID, "parent")
    assert label.text.startswith("rescued attempt")
    assert "summarized" not in label.text
    label.find_element(By.TAG_NAME, "a").click()
    wait(signed_in, lambda d: d.current_url.endswith(parent))


def test_a_summary_is_labelled_as_one(signed_in: Any, traffic: Traffic) -> None:
    signed_in.get(f"{traffic.admin_origin}/requests/{traffic.ids['summary_parent']}")
    child = signed_in.find_element(By.CSS_SELECTOR, "#children a")
    assert child.text.startswith("summary")
    child.click()
    wait(signed_in, lambda d: "summarized for" in d.find_element(By.ID, "parent").text)


def test_chart_switches_to_a_log_scale_when_before_and_after_differ(signed_in: Any) -> None:
    """The chart renderer itself, fed 1.8M before and 18k after, shown in the browser: the
    "after" bars are tall enough to see and the scale is said."""
    from proxy.viewer.conversation_page import chart

    turns = [{"tokens_before": 9_000 * n, "tokens_after": 18_000} for n in range(1, 201)]
    signed_in.get("data:text/html;charset=utf-8," + str(chart(turns)).replace("#", "%23"))
    after = signed_in.find_elements(By.CSS_SELECTOR, "rect.after")
    assert min(a.size["height"] for a in after) > 20
    assert "log scale" in signed_in.find_element(By.TAG_NAME, "figcaption").text
