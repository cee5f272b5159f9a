"""The Request page: its links, the summary facts, what changed and why, and the response."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.viewer import request_page
from proxy.viewer.layout import DASH
from tests import factories as f
from tests.proxy.viewer.html_tree import elements, one, text

HOSTILE = '"><script>alert(1)</script>'
RID = "0190f3a2b4c5d6e7f8091a2b3c4d5e6f"


def record(**fields: Any) -> dict[str, Any]:
    return {
        "id": RID,
        "time": "2026-01-01T12:34:56.789Z",
        "kind": "chat",
        "route": "agents",
        "policy": "agent",
        "mode": "curate",
        "model": "gpt-4o",
        "status": 200,
        "original": [f.user("hello")],
        "curated": None,
        **fields,
    }


def render(rec: dict[str, Any], conversation: str = "c0ffee", prefix: str = "/p") -> str:
    return str(request_page.render(rec, conversation, prefix=prefix))


def facts(html: str) -> dict[str, str]:
    """The summary list as the reader sees it: term -> description."""
    block = html[html.index('<dl class="facts">') : html.index("</dl>")]
    terms = [e.text for e in elements(block, "dt")]
    values = [e.text for e in elements(block, "dd")]
    assert len(terms) == len(values)
    return dict(zip(terms, values, strict=True))


def section(html: str, heading_id: str) -> str:
    start = html.index(f'aria-labelledby="{heading_id}"')
    return html[start : html.index("</section>", start)]


def test_heading_and_links_to_raw_json_and_the_conversation() -> None:
    html = render(record())
    assert one(html, "code", class_="rid").text == RID
    assert one(html, "a", id="raw-json").attrs["href"] == f"/p/requests/{RID}.json"
    assert one(html, "a", href="/p/conversations/c0ffee").text == "This conversation"
    assert "summarized for" not in html


def test_a_summarizer_call_links_to_the_request_it_summarized_for() -> None:
    parent = "a" * 32
    html = render(record(kind="summarizer", parent_id=parent))
    link = one(html, "a", href=f"/p/requests/{parent}")
    assert link.text == parent[:12]
    assert "summarized for " + parent[:12] in text(html)


def test_facts_show_every_field_formatted() -> None:
    usage = {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 512}}
    rec = record(tokens_before=1000, tokens_after=900, latency_ms=1234.4, ttfb_ms=87,
                 client="sha256:abcdef123456", redaction="ok",
                 response={"usage": usage, "text": "hi"})  # fmt: skip
    assert facts(render(rec)) == {
        "Time (UTC)": "2026-01-01 12:34:56",
        "Kind": "chat",
        "Route": "agents",
        "Policy": "agent",
        "Mode": "curate",
        "Model": "gpt-4o",
        "Status": "200",
        "Tokens sent": "1,000 \u2192 900 \u221210%",
        "Cached prompt tokens": "512",
        "Uncurated cost": DASH,
        "Latency": "1,234 ms",
        "Time to first byte": "87 ms",
        "Client key": "sha256:abcdef123456",
        "x-curator-request-id": RID,
        "Redaction": request_page.REDACTION["ok"],
    }


def test_an_uncurated_cost_shows_exact_or_as_an_estimate_with_its_range() -> None:
    exact = {"price": "gpt-4o*", "actual_usd": 0.001, "uncurated_usd": 0.0025}
    assert facts(render(record(cost=exact)))["Uncurated cost"] == "$0.002500"
    ranged = {"learned": True, "usd_range": [0.001, 0.004]}
    shown = facts(render(record(cost={**exact, "uncurated_estimate": ranged})))
    assert shown["Uncurated cost"] == "~$0.002500 (estimate, $0.001000\u2013$0.004000)"


def test_missing_facts_are_dashes_and_no_client_key_says_none() -> None:
    shown = facts(render({"id": RID, "time": "2026-01-01T00:00:00Z"}))
    for key in ("Kind", "Route", "Policy", "Mode", "Model", "Status", "Tokens sent",
                "Cached prompt tokens", "Uncurated cost", "Latency",
                "Time to first byte"):  # fmt: skip
        assert shown[key] == DASH, key
    assert shown["Client key"] == "none"
    assert shown["Redaction"] == "unknown"


@pytest.mark.parametrize(
    ("redaction", "shown", "css"),
    [
        ("ok", request_page.REDACTION["ok"], "redaction ok"),
        ("failed", request_page.REDACTION["failed"], "redaction failed"),
        (None, "unknown", "redaction unknown"),
        ("partial", "partial", "redaction partial"),
    ],
)
def test_redaction_state_is_explained(redaction: str | None, shown: str, css: str) -> None:
    html = render(record(redaction=redaction))
    assert one(html, "span", class_=css).text == shown


def test_a_failed_status_is_marked_bad() -> None:
    assert one(render(record(status=502)), "span", class_="status bad").text == "502"


def test_a_skipped_request_says_why() -> None:
    html = render(record(skip_reason="body too large"))
    assert one(html, "p", class_="skip").text == "Curation skipped: body too large"
    assert elements(render(record()), "p", class_="skip") == []


def test_changes_table_lists_each_action_in_order() -> None:
    actions = [
        {"curator": "tool_result_truncation", "kind": "truncate", "indexes": [5],
         "tokens_removed": 1900, "reason": "'grep' result cut"},
        {"curator": "token_budget", "kind": "drop", "indexes": [2, 3, 4], "tokens_removed": 40},
        "not an action",
        {"curator": "noop", "kind": "flag"},
        {"indexes": [1]},
    ]  # fmt: skip
    changes = section(render(record(actions=actions)), "changes-h")
    rows = [[td.text for td in elements(tr_html, "td")] for tr_html in _rows(changes)]
    assert rows == [
        ["tool_result_truncation", "truncate", "5", "1,900", "'grep' result cut"],
        ["token_budget", "drop", "2, 3, 4", "40", ""],
        ["noop", "flag", "", DASH, ""],
        [DASH, DASH, "1", DASH, ""],  # a record from an older or foreign writer: no "None"
    ]


def _rows(html: str) -> list[str]:
    body = html[html.index("<tbody>") + len("<tbody>") : html.index("</tbody>")]
    return [part for part in body.split("</tr>") if part]


@pytest.mark.parametrize("actions", [None, [], ["junk", 3]])
def test_no_actions_says_no_curator_changed_it(actions: Any) -> None:
    changes = section(render(record(actions=actions)), "changes-h")
    assert one(changes, "p", class_="muted").text == "No curator changed this request."
    assert elements(changes, "table") == []


def test_response_shows_finish_text_calls_and_usage() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 2}
    calls = [{"id": "call_1", "function": {"name": "grep", "arguments": '{"q": "x"}'}}]
    response = {"finish_reason": "tool_calls", "text": "Looking.", "tool_calls": calls,
                "usage": usage}  # fmt: skip
    resp = section(render(record(response=response)), "resp-h")
    assert "Finish: tool_calls" in text(resp)
    assert "partial" not in resp
    assert one(resp, "div", class_="text").text == "Looking."
    assert one(resp, "ul", class_="calls").text.startswith('grep({"q": "x"})')
    assert json.loads(one(resp, "pre", class_="json").text) == usage
    assert "Error" not in text(resp)


def test_a_stream_cut_short_is_marked_partial_and_missing_parts_are_dashes() -> None:
    resp = section(render(record(response={"truncated": True})), "resp-h")
    assert "Finish: \u2013 (stream cut short; partial)" in text(resp)
    assert one(resp, "pre", class_="json").text == "null"  # no usage came back


def test_an_error_is_shown_as_json_beside_or_instead_of_a_response() -> None:
    error = {"type": "upstream_timeout", "message": "no answer in 60 s"}
    alone = section(render(record(error=error)), "resp-h")
    assert [h.text for h in elements(alone, "h3")] == ["Error"]
    assert json.loads(one(alone, "pre", class_="json").text) == error
    both = section(render(record(error=error, response={"text": "part"})), "resp-h")
    assert [h.text for h in elements(both, "h3")] == ["Usage", "Error"]


@pytest.mark.parametrize("response", [None, "not a mapping", ["x"]])
def test_no_response_stored(response: Any) -> None:
    resp = section(render(record(response=response)), "resp-h")
    assert one(resp, "p", class_="muted").text == "No response stored."


def test_hostile_content_is_text_everywhere() -> None:
    rec = record(
        id=HOSTILE, parent_id=HOSTILE, route=HOSTILE, model=HOSTILE, client=HOSTILE,
        redaction=HOSTILE, skip_reason=HOSTILE, original=[f.user(HOSTILE)],
        actions=[{"curator": HOSTILE, "kind": HOSTILE, "reason": HOSTILE, "indexes": [0]}],
        response={"text": HOSTILE, "finish_reason": HOSTILE, "usage": {"k": HOSTILE},
                  "tool_calls": [{"id": HOSTILE, "function": {"name": HOSTILE,
                                                              "arguments": HOSTILE}}]},
        error={"message": HOSTILE},
    )  # fmt: skip
    html = render(rec, conversation=HOSTILE, prefix=HOSTILE)
    assert "<script>" not in html
    assert elements(html, "script") == []
    assert one(html, "code", class_="rid").text == HOSTILE
    assert facts(html)["Client key"] == HOSTILE
    assert one(section(html, "resp-h"), "div", class_="text").text == HOSTILE
    # Attributes stay attributes: an id or a conversation key cannot break out of its href.
    assert one(html, "a", id="raw-json").attrs["href"] == f"{HOSTILE}/requests/{HOSTILE}.json"
    assert one(html, "a", href=f"{HOSTILE}/conversations/{HOSTILE}").text == "This conversation"
