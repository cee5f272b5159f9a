"""The page shell and the formatting helpers every viewer page shares."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import Markup

from proxy.viewer import layout
from proxy.viewer.layout import DASH
from tests.proxy.viewer.html_tree import elements, one, text

HOSTILE = '"><script>alert(1)</script>'


def shell(**overrides: Any) -> bytes:
    args: dict[str, Any] = {"prefix": "", "section": "", "signed_in": False}
    args.update(overrides)
    return layout.page(args.pop("title", "Requests"), args.pop("main", Markup("")), **args)


def test_page_is_one_document_with_landmarks_and_assets_under_the_prefix() -> None:
    html = shell(title="Requests", main=Markup("<h1>Hello</h1>"), prefix="/curator")
    assert html.startswith(b"<!doctype html>")
    assert one(html, "title").text == "Requests \u00b7 context-curator"
    assert one(html, "main", id="main").text == "Hello"
    assert one(html, "link", rel="stylesheet").attrs["href"] == "/curator/static/viewer.css"
    assert one(html, "script").attrs["src"] == "/curator/static/viewer.js"
    assert one(html, "a", class_="skip").attrs["href"] == "#main"
    nav = [
        (a.attrs["href"], a.text) for a in elements(html, "a") if a.text in {"Requests", "Overview"}
    ]
    assert nav == [("/curator/requests", "Requests"), ("/curator/overview", "Overview")]


@pytest.mark.parametrize(
    ("section", "current"), [("requests", "Requests"), ("overview", "Overview")]
)
def test_the_current_section_is_marked_for_assistive_tech(section: str, current: str) -> None:
    marked = elements(shell(section=section), "a", aria_current="page")
    assert [a.text for a in marked] == [current]


def test_no_section_marks_nothing() -> None:
    assert elements(shell(section=""), "a", aria_current="page") == []


def test_sign_out_only_when_signed_in() -> None:
    assert elements(shell(signed_in=False), "a", class_="signout") == []
    link = one(shell(signed_in=True, prefix="/p"), "a", class_="signout")
    assert link.attrs["href"] == "/p/logout"
    assert link.text == "Sign out"


def test_title_and_prefix_are_escaped_but_main_is_trusted_markup() -> None:
    html = shell(title=HOSTILE, prefix=HOSTILE, main=Markup("<p id=ok>x</p>"))
    assert b"<script>alert" not in html
    assert one(html, "title").text.startswith(HOSTILE)
    assert one(html, "link", rel="stylesheet").attrs["href"] == HOSTILE + "/static/viewer.css"
    assert one(html, "p", id="ok").text == "x"
    # A plain str for `main` is text, not markup.
    assert b"&lt;b&gt;" in shell(main="<b>")


def test_href_drops_empty_values_and_encodes_the_rest() -> None:
    assert layout.href("/p", "/requests") == "/p/requests"
    assert layout.href("/p", "/requests", {"route": "", "offset": None}) == "/p/requests"
    assert layout.href("", "/requests", {"q": "a&b=c d", "offset": 0}) == (
        "/requests?q=a%26b%3Dc+d&offset=0"
    )


def test_request_href_quotes_every_reserved_character() -> None:
    assert layout.request_href("/p", "a200") == "/p/requests/a200"
    assert layout.request_href("", "a/b?c#d e") == "/requests/a%2Fb%3Fc%23d%20e"
    assert layout.request_href("", None) == "/requests/None"


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0"), (1234567, "1,234,567"), (-5, "-5"), (None, DASH), (True, DASH), (1.5, DASH),
     ("12", DASH)],
)  # fmt: skip
def test_num(value: object, shown: str) -> None:
    assert layout.num(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0 ms"), (1234.4, "1,234 ms"), (12.6, "13 ms"), (None, DASH), ("5", DASH)],
)
def test_ms(value: object, shown: str) -> None:
    assert layout.ms(value) == shown


@pytest.mark.parametrize(
    ("stamp", "shown"),
    [
        ("2026-01-01T00:00:00.000Z", "2026-01-01 00:00:00"),
        ("2026-01-01T00:00:00.900Z", "2026-01-01 00:00:00"),
        ("2026-01-01T01:30:00+02:00", "2025-12-31 23:30:00"),
        ("2026-01-01T12:00:00", "2026-01-01 12:00:00"),  # no zone: UTC
        ("yesterday", "yesterday"),
        ("", ""),
    ],
)
def test_when_shows_utc_to_the_second_or_the_stamp_as_stored(stamp: str, shown: str) -> None:
    assert layout.when(stamp) == shown


def test_tokens_shows_the_saving_only_when_curation_changed_the_count() -> None:
    assert layout.tokens({}) == DASH
    assert layout.tokens({"tokens_before": "100"}) == DASH
    assert layout.tokens({"tokens_before": 1200}) == "1,200"
    assert layout.tokens({"tokens_before": 1200, "tokens_after": 1200}) == "1,200"
    saved = layout.tokens({"tokens_before": 1000, "tokens_after": 250})
    assert text(saved) == "1,000 \u2192 250 \u221275%"
    grew = layout.tokens({"tokens_before": 1000, "tokens_after": 1500})
    assert text(grew) == "1,000 \u2192 1,500 +50%"
    assert one(grew, "span").attrs["class"] == "grew"
    assert one(saved, "strong").text == "250"
    # Never a division by zero: no share of nothing.
    assert text(layout.tokens({"tokens_before": 0, "tokens_after": 5})) == "0 \u2192 5"


def test_cached_and_prompt_tokens_read_either_protocols_usage() -> None:
    chat = {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 512}}
    responses = {"input_tokens": 700, "input_tokens_details": {"cached_tokens": 256}}
    chat, responses = ({"response": {"usage": usage}} for usage in (chat, responses))
    assert (layout.prompt_tokens(chat), layout.cached_tokens(chat)) == (900, 512)
    assert (layout.prompt_tokens(responses), layout.cached_tokens(responses)) == (700, 256)


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"response": None},
        {"response": "text"},
        {"response": {}},
        {"response": {"usage": None}},
        {"response": {"usage": {"prompt_tokens": "9", "prompt_tokens_details": None}}},
        {"response": {"usage": {"prompt_tokens_details": {"cached_tokens": "5"}}}},
    ],
)
def test_usage_that_is_missing_or_malformed_gives_none(record: dict[str, Any]) -> None:
    assert layout.cached_tokens(record) is None
    assert layout.prompt_tokens(record) is None


@pytest.mark.parametrize(
    ("status", "kind", "shown"),
    [(200, "ok", "200"), (399, "ok", "399"), (400, "bad", "400"), (502, "bad", "502"),
     (None, "bad", DASH), ("200", "bad", "200")],
)  # fmt: skip
def test_status_badge(status: object, kind: str, shown: str) -> None:
    badge = one(layout.status_badge(status), "span")
    assert badge.attrs["class"] == f"status {kind}"
    assert badge.text == shown


def test_action_counts_one_chip_per_curator_counting_messages() -> None:
    record = {
        "actions": [
            {"curator": "token_budget", "indexes": [2, 3, 4]},
            {"curator": "tool_result_truncation", "indexes": [5]},
            {"curator": "token_budget", "indexes": []},  # acted on no message: still once
            "not an action",
        ]
    }
    chips = [c.text for c in elements(layout.action_counts(record), "span", class_="chip")]
    assert chips == ["token_budget \u00d74", "tool_result_truncation \u00d71"]


def test_action_counts_without_actions_and_when_skipped() -> None:
    assert text(layout.action_counts({"actions": []})) == "unchanged"
    assert text(layout.action_counts({})) == "unchanged"
    skipped = layout.action_counts({"skip_reason": "stream", "actions": [{"curator": "x"}]})
    assert one(skipped, "span", class_="chip skip").text == "skipped: stream"


def test_action_counts_escape_curator_names_and_skip_reasons() -> None:
    named = str(layout.action_counts({"actions": [{"curator": HOSTILE, "indexes": [1]}]}))
    skipped = str(layout.action_counts({"skip_reason": HOSTILE}))
    for html in (named, skipped):
        assert "<script>" not in html
        assert HOSTILE in text(html)


@settings(max_examples=60, deadline=None)
@given(st.text(), st.text())
def test_any_title_and_prefix_stay_text(title: str, prefix: str) -> None:
    html = shell(title=title, prefix=prefix, main=Markup(""))
    assert len(elements(html, "script")) == 1
    assert one(html, "title").text == f"{title} \u00b7 context-curator"
    assert one(html, "a", class_="skip").attrs["href"] == "#main"
