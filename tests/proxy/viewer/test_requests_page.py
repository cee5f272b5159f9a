"""The Requests page: URL parameters -> a store query, and the list, filters, pager and
empty states a user sees."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.readers.query import KINDS, Page, Query
from proxy.viewer import requests_page
from proxy.viewer.app import Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.layout import DASH
from proxy.viewer.requests_page import FILTERS, PAGE_SIZE, BadQuery, parse_query
from proxy.viewer.store import opener
from proxy.viewer.wire import ViewRequest
from tests.proxy.viewer.html_tree import Element, elements, one, text

HOSTILE = '"><script>alert(1)</script>'
FACETS = {"route": ["agents", "chat"], "policy": ["agent"], "model": ["gpt-4o"], "status": [200]}


def row(n: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"{n:032x}",
        "time": "2026-01-01T00:00:00.000Z",
        "kind": "chat",
        "model": "gpt-4o",
        "route": "agents",
        "policy": "agent",
        "status": 200,
        "tokens_before": 100,
        "tokens_after": 60,
        **fields,
    }


def render(
    rows: list[dict[str, Any]],
    params: dict[str, str] | None = None,
    *,
    more: bool = False,
    prefix: str = "",
    problem: str | None = None,
) -> str:
    return str(
        requests_page.render(Page(rows, more), params or {}, FACETS, prefix=prefix, problem=problem)
    )


def select(html: str, name: str) -> Element:
    return one(html, "select", name=name)


def options(html: str, name: str) -> list[tuple[str | None, bool]]:
    """(value, selected) of each option of the named select."""
    start = html.index(f'<select name="{name}">')
    block = html[start : html.index("</select>", start)]
    return [(o.attrs["value"], "selected" in o.attrs) for o in elements(block, "option")]


# parse_query


def test_an_empty_query_asks_for_the_first_page_of_everything() -> None:
    assert parse_query({}) == Query(limit=PAGE_SIZE)
    blanks = dict.fromkeys(FILTERS, "")
    assert parse_query(blanks) == Query(limit=PAGE_SIZE)


def test_every_filter_reaches_the_query() -> None:
    query = parse_query(
        {"route": "agents", "policy": "agent", "model": "gpt-4o", "status": "429",
         "kind": "summarizer", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z",
         "conversation": "ab12", "q": "grep", "offset": "100"},
        limit=7,
    )  # fmt: skip
    assert query == Query(
        route="agents", policy="agent", model="gpt-4o", status=429, kind="summarizer",
        since=1_767_225_600.0, until=1_767_312_000.0, conversation="ab12", text="grep",
        limit=7, offset=100,
    )  # fmt: skip


def test_a_duration_is_counted_back_from_now() -> None:
    before = time.time()
    query = parse_query({"since": "2h"})
    after = time.time()
    assert query.since is not None
    assert before - 7200 <= query.since <= after - 7200


@pytest.mark.parametrize("status", ["ok", "-1", "4o4", "20 0", "\u00b2", "\u0664\u0662\u0669"])
def test_a_status_that_is_not_an_http_status_names_the_parameter(status: str) -> None:
    with pytest.raises(BadQuery, match=r"^status: expected an HTTP status such as 200, got"):
        parse_query({"status": status})


@pytest.mark.parametrize("status", ["9" * 30, "9" * 5000, "1000"])
def test_an_out_of_range_status_is_refused_not_passed_to_the_store(status: str) -> None:
    # A 30-digit status overflowed SQLite's INTEGER; 5000 digits made int() itself raise.
    with pytest.raises(BadQuery, match=r"^status: "):
        parse_query({"status": status})


@pytest.mark.parametrize(("name", "value"), [("since", "soon"), ("until", "31/01/2026")])
def test_a_bad_time_names_the_range_and_quotes_the_value(name: str, value: str) -> None:
    with pytest.raises(BadQuery, match=rf"^time range: expected an ISO time .*got '{value}'"):
        parse_query({name: value})


@pytest.mark.parametrize("offset", ["", "x", "-50", "1.5", "\u00b2", "\u0665", "9" * 5000])
def test_an_unusable_offset_starts_at_the_top(offset: str) -> None:
    # "\u00b2" is a digit to str.isdigit but not to int(): it was an uncaught ValueError.
    assert parse_query({"offset": offset}).offset == 0


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from([*FILTERS, "offset"]), st.text(max_size=40)))
def test_any_parameters_give_a_storable_query_or_a_bad_query(params: dict[str, str]) -> None:
    try:
        query = parse_query(params)
    except BadQuery as exc:
        problem = str(exc)
        assert problem.startswith(("status: ", "time range: "))
        return
    assert 0 <= query.offset < 2**63
    assert query.status is None or 100 <= query.status <= 999


# render: the list


def test_rows_link_to_their_request_and_show_the_summary() -> None:
    rows = [row(2, cost_usd=0.01234, tokens_after=100, tokens_before=100), row(1)]
    html = render(rows, prefix="/curator")
    assert [tr.attrs["data-id"] for tr in elements(html, "tr") if "data-id" in tr.attrs] == [
        f"{2:032x}",
        f"{1:032x}",
    ]
    link = elements(html, "a", class_="rowlink")[0]
    assert link.attrs["href"] == f"/curator/requests/{2:032x}"
    assert link.text == f"{2:032x}"[:12]
    assert link.attrs["title"] == f"{2:032x}"
    first = [td.text for td in elements(html[: html.index("</tr>", html.index("<tbody>"))], "td")]
    assert first == ["2026-01-01 00:00:00", f"{2:032x}"[:12], "chat", "gpt-4o",
                     "agents \u00b7 agent", "100", "$0.0123", "unchanged", "200"]  # fmt: skip
    second = one(html, "tr", data_id=f"{1:032x}").text
    assert "100 \u2192 60 \u221240%" in second
    assert DASH in second  # no cost on the record


def test_a_row_with_missing_fields_shows_dashes() -> None:
    html = render([{"id": "x1", "time": "2026-01-01T00:00:00Z"}])
    cells = [td.text for td in elements(html, "td")]
    assert cells == ["2026-01-01 00:00:00", "x1", DASH, DASH, f"{DASH} \u00b7 {DASH}", DASH, DASH,
                     "unchanged", DASH]  # fmt: skip
    assert one(html, "span", class_="status bad").text == DASH


def test_hostile_record_fields_are_text() -> None:
    html = render([row(1, id=HOSTILE, model=HOSTILE, route=HOSTILE, policy=HOSTILE, kind=HOSTILE)])
    assert "<script>" not in html
    assert one(html, "a", class_="rowlink").attrs["href"].startswith("/requests/%22%3E%3Cscript")
    assert text(html).count("alert(1)") >= 4


def test_no_rows_is_an_empty_state_without_a_table_or_pager() -> None:
    html = render([])
    assert one(html, "p", class_="empty").text == "No records."
    assert one(html, "p", class_="count").text == "Nothing matches."
    assert elements(html, "table") == []
    assert elements(html, "nav") == []


def test_the_count_says_which_records_and_whether_more_follow() -> None:
    assert one(render([row(1), row(2)]), "p", class_="count").text == (
        "Records 1\u20132, newest first."
    )
    shown = one(render([row(1)] * 3, {"offset": "50"}, more=True), "p", class_="count").text
    assert shown == "Records 51\u201353 (more follow), newest first."


# render: filters, problems, pager


def test_the_form_keeps_what_was_asked_and_offers_the_stores_values() -> None:
    params = {"route": "chat", "status": "200", "kind": "summarizer", "q": "needle", "since": "1h"}
    html = render([row()], params, prefix="/p")
    form = one(html, "form", role="search")
    assert form.attrs["action"] == "/p/requests"
    assert options(html, "route") == [("", False), ("agents", False), ("chat", True)]
    assert options(html, "status") == [("", False), ("200", True)]
    assert options(html, "kind") == [("", False), *((k, k == "summarizer") for k in KINDS)]
    assert options(html, "policy") == [("", False), ("agent", False)]
    assert one(html, "input", name="q").attrs["value"] == "needle"
    assert one(html, "input", name="since").attrs["value"] == "1h"
    assert one(html, "input", name="until").attrs["value"] == ""
    assert one(html, "a", href="/p/requests").text == "Clear"


def test_a_value_the_store_does_not_hold_is_still_shown_selected() -> None:
    html = render([], {"model": "gpt-9", "route": HOSTILE})
    assert options(html, "model") == [("", False), ("gpt-4o", False), ("gpt-9", True)]
    assert ("" + HOSTILE, True) in options(html, "route")
    assert "<script>" not in html


def test_hostile_text_inputs_stay_in_their_attribute() -> None:
    html = render([], {"q": HOSTILE, "conversation": HOSTILE})
    assert "<script>" not in html
    assert one(html, "input", name="q").attrs["value"] == HOSTILE
    assert one(html, "input", name="conversation").attrs["value"] == HOSTILE


def test_a_problem_is_an_escaped_alert_above_the_list() -> None:
    html = render([row()], problem=f"status: got {HOSTILE!r}")
    alert = one(html, "p", role="alert")
    assert alert.text == f"status: got {HOSTILE!r}"
    assert "<script>" not in html
    assert html.index('role="alert"') < html.index("<table")
    assert elements(render([row()]), "p", role="alert") == []


def test_first_page_with_more_links_only_to_older_keeping_the_filters() -> None:
    params = {"route": "chat", "q": "a b", "unknown": "dropped", "offset": "0"}
    html = render([row()] * PAGE_SIZE, params, more=True, prefix="/p")
    links = elements(html, "a", rel="next") + elements(html, "a", rel="prev")
    assert [(a.attrs["rel"], a.attrs["href"]) for a in links] == [
        ("next", f"/p/requests?route=chat&q=a+b&offset={PAGE_SIZE}")
    ]


def test_a_middle_page_links_both_ways() -> None:
    html = render([row()] * PAGE_SIZE, {"offset": str(2 * PAGE_SIZE), "model": "m"}, more=True)
    assert one(html, "a", rel="prev").attrs["href"] == f"/requests?model=m&offset={PAGE_SIZE}"
    assert one(html, "a", rel="next").attrs["href"] == f"/requests?model=m&offset={3 * PAGE_SIZE}"


def test_newer_from_the_second_page_is_the_first_page_without_an_offset() -> None:
    for offset in (PAGE_SIZE, 10):  # 10: a hand-typed offset never goes negative
        html = render([row()], {"offset": str(offset), "kind": "chat"})
        assert one(html, "a", rel="prev").attrs["href"] == "/requests?kind=chat"
        assert elements(html, "a", rel="next") == []


def test_the_last_page_has_no_older_link_and_a_single_page_no_pager() -> None:
    assert elements(render([row()], {"offset": "50"}), "a", rel="next") == []
    assert elements(render([row()]), "nav", class_="pager") == []


@pytest.mark.parametrize("offset", ["\u00b2", "9" * 5000, "x"])
def test_an_unusable_offset_renders_as_the_first_page(offset: str) -> None:
    html = render([row()], {"offset": offset}, more=True)
    assert one(html, "p", class_="count").text.startswith("Records 1\u20131 ")
    assert elements(html, "a", rel="prev") == []
    assert one(html, "a", rel="next").attrs["href"] == "/requests?offset=1"


@pytest.mark.parametrize(
    "query", ["status=%C2%B2", "status=" + "9" * 30, "offset=%C2%B2", "offset=" + "9" * 30]
)
def test_odd_numbers_in_the_url_are_a_page_not_a_crash(
    store_paths: tuple[Path, Path], query: str
) -> None:
    for store in store_paths:
        viewer = Viewer(opener(str(store)), AdminKeys(()))
        reply = viewer.handle(ViewRequest.parse("GET", f"/requests?{query}", {}))
        assert reply.status == 200
        assert b'class="count"' in reply.body
