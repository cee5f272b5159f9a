"""simulate_render.py: the text and JSON reports of `curator simulate`, the budget used after
each curator, and the message diffs, rendered from hand-built reports (no curation run)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Action
from policies.chain import CurationResult
from policies.messages import Message
from policies.policy import Budget
from policies.prefix_cache import PrefixCache, RequestCost
from policies.summary_io import SummaryStats
from proxy.cli import simulate_json, simulate_render
from proxy.cli.simulate_input import Request
from proxy.cli.simulate_model import Options, Priced, Report, SimulatedRequest
from proxy.cli.simulate_render import _indexes, diff_lines, utilization
from tests.factories import assistant, assistant_calls, image_part, text_part, tool_result, user

Msg = dict[str, Any]
BUDGET = Budget(context_window=1000, reserve_output=100, tools=0, messages=880, margin=20)
MESSAGES: list[Message] = [user("first"), assistant("reply"), user("last")]


def curated(
    tokens_before: int = 1000,
    tokens_after: int = 400,
    actions: tuple[Action, ...] = (Action("token_budget", "drop", (0, 1), 600, "over budget"),),
    budget: Budget = BUDGET,
    summaries: SummaryStats | None = None,
) -> SimulatedRequest:
    result = CurationResult(MESSAGES[2:], actions, tokens_before, tokens_after)
    request = Request(1, {"model": "m", "messages": MESSAGES})
    return SimulatedRequest(request, "r", "p", budget, tokens_before, result, summaries=summaries)


def rejected() -> SimulatedRequest:
    request = Request(2, {"messages": [user("x")]})
    return SimulatedRequest(request, None, "strict", BUDGET, 50, rejected="400 too long")


def skipped() -> SimulatedRequest:
    request = Request(3, {"model": "m", "messages": []})
    return SimulatedRequest(request, "r", "p", BUDGET, 2000, skipped="no_messages")


Run = list[Priced]


def report(*outcomes: SimulatedRequest, original: Any = None, curated: Any = None) -> Run:
    one = RequestCost(10, 0, 10.0)
    original = original or [one for _ in outcomes]
    curated = curated or original
    return [Priced(*each) for each in zip(outcomes, original, curated, strict=True)]


def three() -> Run:
    original = [
        RequestCost(1000, 0, 1000.0),
        RequestCost(50, 0, 50.0),
        RequestCost(2000, 1024, 1078.4),
    ]
    after = [RequestCost(400, 0, 400.0), RequestCost(50, 0, 50.0), RequestCost(2000, 1024, 1078.4)]
    return report(curated(), rejected(), skipped(), original=original, curated=after)


def render_text(run: Run, options: Options) -> str:
    """The whole text report, as the command prints it piece by piece."""
    return "".join(simulate_render.render_text(run, Report(PrefixCache()), options)).rstrip("\n")


def render_json(run: Run, options: Options) -> str:
    text = "".join(simulate_json.render_json(run, Report(PrefixCache()), options))
    data = {
        "pricing": json.loads(text)["pricing"],
        "summaries_are_placeholders": not options.allow_calls,
        "requests": [simulate_json.request_item(p, options) for p in run],
        "total": json.loads(text)["total"],
    }
    assert text == json.dumps(data, indent=2, ensure_ascii=False) + "\n", "as one dumps"
    return text


# -- the text report -------------------------------------------------------------------


def test_the_text_report_of_a_curated_a_rejected_and_a_skipped_request() -> None:
    text = render_text(three(), Options(input="conv.jsonl"))
    assert text.splitlines() == [
        "curator simulate: requests from conv.jsonl",
        "",
        "request 1 (line 1): model m, route r, policy p",
        "  budget: window 1,000 - reply 100 - tools 0 - margin 20 = 880 tokens for messages",
        "  tokens: 1,000 -> 400 (-60.0%)",
        "  token_budget drop [0-1] -600: over budget",
        "  budget use: 45.5% of the budget (after token_budget 45.5%)",
        "  original:     1,000 input,         0 cached ->     1,000.0 units",
        "  curated:        400 input,         0 cached ->       400.0 units",
        "",
        "request 2 (line 2): model (none), policy strict",
        "  budget: window 1,000 - reply 100 - tools 0 - margin 20 = 880 tokens for messages",
        "  REJECTED: 400 too long",
        "",
        "request 3 (line 3): model m, route r, policy p",
        "  budget: window 1,000 - reply 100 - tools 0 - margin 20 = 880 tokens for messages",
        "  SKIPPED: no_messages; the proxy forwards it unchanged",
        "",
        "total: 3 request(s), 1 rejected, 1 skipped",
        "  message tokens: 1,000 -> 400 (-60.0%)",
        "  actions: token_budget=1",
        "  budget use of the 1 over-budget request(s): lowest 45.5%, median 45.5%",
        "  prefix cache: cached input at 0.1 of the input price, once a prefix of >= 1,024 "
        "tokens repeats (in steps of 128)",
        "                  input      cached    hit         units   cache saves",
        "  original        3,050       1,024  33.6%       2,128.4         921.6",
        "  curated         2,450       1,024  41.8%       1,528.4         921.6",
        "  curated costs 71.8% of the original",
    ]


def test_standard_input_is_named_so() -> None:
    text = render_text(report(rejected()), Options(input="-"))
    assert text.splitlines()[0] == "curator simulate: requests from standard input"


def test_an_unchanged_request_says_so_and_shows_no_percentage() -> None:
    outcome = curated(tokens_before=300, tokens_after=300, actions=())
    lines = render_text(report(outcome), Options(input="x")).splitlines()
    assert lines[4:7] == [
        "  tokens: 300 -> 300",
        "  no curator changed anything",
        "  budget use: 34.1% of the budget",
    ]
    # Under budget: no over-budget line in the totals; nothing changed, no actions.
    assert "  actions: none" in lines
    assert not any(line.startswith("  budget use of the") for line in lines)


def test_a_request_that_grew_shows_a_positive_change() -> None:
    outcome = curated(tokens_before=200, tokens_after=250, actions=())
    assert "  tokens: 200 -> 250 (+25.0%)" in render_text(report(outcome), Options(input="x"))


def test_no_ratio_line_when_the_original_costs_nothing() -> None:
    free = [RequestCost(0, 0, 0.0)]
    lines = render_text(report(rejected(), original=free), Options(input="x")).splitlines()
    assert lines[-2:] == [
        "  original            0           0   0.0%           0.0           0.0",
        "  curated             0           0   0.0%           0.0           0.0",
    ]


def test_a_placeholder_summary_and_summarizer_failures_are_flagged() -> None:
    stats = SummaryStats(calls=1, errors=["via main/x: timeout", "via main/x: HTTP 503"])
    action = Action("summarizer", "summarize", (0, 1), 600, "old turns")
    outcome = curated(actions=(action,), summaries=stats)
    lines = render_text(report(outcome), Options(input="x")).splitlines()
    assert lines[7:11] == [
        "  summarizer: the summary is a PLACEHOLDER, no model was called",
        "  summarizer failed: via main/x: timeout",
        "  summarizer failed: via main/x: HTTP 503",
        "  original:        10 input,         0 cached ->        10.0 units",
    ]
    # With real calls, or with no call nor cache hit, there is no placeholder to flag.
    allowed = render_text(report(outcome), Options(input="x", allow_calls=True))
    assert "PLACEHOLDER" not in allowed
    idle = curated(actions=(action,), summaries=SummaryStats(failures=1))
    assert "PLACEHOLDER" not in render_text(report(idle), Options(input="x"))


def test_the_totals_median_is_the_upper_middle_share_of_over_budget_requests() -> None:
    outcomes = [
        curated(tokens_before=1000, tokens_after=t, actions=()) for t in (880, 440, 660, 220)
    ]
    under = curated(tokens_before=500, tokens_after=100, actions=())  # never over budget
    lines = render_text(report(*outcomes, under), Options(input="x")).splitlines()
    assert "  budget use of the 4 over-budget request(s): lowest 25.0%, median 75.0%" in lines
    assert "  message tokens: 4,500 -> 2,300 (-48.9%)" in lines


def test_the_diff_follows_a_request_when_asked() -> None:
    lines = render_text(report(curated()), Options(input="x", diff=True)).splitlines()
    at = lines.index("  curated:         10 input,         0 cached ->        10.0 units")
    assert lines[at + 1 : at + 12] == [
        "",
        "--- original",
        "+++ curated",
        "@@ -1,6 +1,2 @@",
        "-## user",
        "-  first",
        "-## assistant",
        "-  reply",
        " ## user",
        "   last",
        "",
    ]


# -- utilization -----------------------------------------------------------------------


def test_utilization_lists_each_curator_where_it_last_acted() -> None:
    actions = (
        Action("a", "truncate", (1,), 100, ""),
        Action("b", "drop", (2,), 200, ""),
        Action("a", "truncate", (3,), 100, ""),
    )
    budget = Budget(1000, 0, 0, 500, 0)
    # 1,000 - 100 - 200 = 700 after b; the last share is the chain's own count, not 600.
    outcome = curated(tokens_before=1000, tokens_after=550, actions=actions, budget=budget)
    assert utilization(outcome) == [("b", 1.4), ("a", 1.1)]


def test_utilization_is_empty_without_a_result_a_budget_or_an_action() -> None:
    assert utilization(rejected()) == []
    assert utilization(curated(budget=Budget(100, 100, 0, 0, 0))) == []
    assert utilization(curated(budget=Budget(100, 200, 0, -100, 0))) == []
    assert utilization(curated(actions=())) == []


# -- diffs -----------------------------------------------------------------------------


def test_identical_messages_have_no_difference() -> None:
    assert diff_lines(MESSAGES, list(MESSAGES)) == ["(no difference)"]
    assert diff_lines([], []) == ["(no difference)"]


def test_diffs_show_ids_calls_and_non_text_parts_but_no_indexes() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"d": 1}'}}
    odd = {"id": "c2", "type": "function", "function": "not an object"}
    original = [
        user([text_part("look"), image_part()], name="ann"),
        assistant_calls(call, odd, content="two lines\nof text"),
        tool_result("c1", "a.txt"),
    ]
    assert diff_lines(original, original[:2]) == [
        "--- original",
        "+++ curated",
        "@@ -7,4 +7,2 @@",
        '   -> ls({"d": 1}) id=c1',
        "   -> () id=c2",
        "-## tool tool_call_id=c1",
        "-  a.txt",
    ]
    assert diff_lines(original[2:], original[1:2])[3:] == [
        "-## tool tool_call_id=c1",
        "-  a.txt",
        "+## assistant",
        "+  two lines",
        "+  of text",
        '+  -> ls({"d": 1}) id=c1',
        "+  -> () id=c2",
    ]
    assert diff_lines(original[:1], [])[3:] == [
        "-## user name=ann",
        "-  look",
        "-  [image_url part]",
    ]


# -- the JSON report -------------------------------------------------------------------


def test_the_json_report_of_a_curated_and_a_rejected_request() -> None:
    data = json.loads(render_json(report(curated(), rejected()), Options(input="x")))
    first, second = data["requests"]
    assert first == {
        "line": 1,
        "model": "m",
        "route": "r",
        "policy": "p",
        "budget": {
            "context_window": 1000, "reserve_output": 100, "tools": 0, "messages": 880,
            "margin": 20, "scale": 1.0,
        },
        "rejected": None,
        "skipped": None,
        "tokens_before": 1000,
        "tokens_after": 400,
        "utilization": 400 / 880,
        "utilization_by_curator": {"token_budget": 400 / 880},
        "actions": [
            {
                "curator": "token_budget", "kind": "drop", "indexes": [0, 1],
                "tokens_removed": 600, "reason": "over budget",
            }
        ],
        "summarizer": None,
        "cost": {
            "original": {"input_tokens": 10, "cached_tokens": 0, "cost": 10.0},
            "curated": {"input_tokens": 10, "cached_tokens": 0, "cost": 10.0},
        },
    }  # fmt: skip
    assert (second["line"], second["model"], second["route"]) == (2, "", None)
    assert (second["rejected"], second["tokens_after"], second["utilization"]) == (
        "400 too long",
        None,
        None,
    )
    assert (second["actions"], second["utilization_by_curator"]) == ([], {})
    assert data["pricing"] == {"cached_price": 0.1, "min_tokens": 1024, "increment": 128}
    assert data["summaries_are_placeholders"] is True
    total = {"input_tokens": 20, "cached_tokens": 0, "cost": 20.0, "hit_ratio": 0.0}
    assert data["total"] == {"original": total, "curated": total}


def test_the_json_report_carries_summaries_diffs_and_a_zero_budget() -> None:
    stats = SummaryStats(calls=2, prompt_tokens=321, errors=["boom"])
    outcome = curated(summaries=stats, budget=Budget(100, 100, 0, 0, 0))
    options = Options(input="x", diff=True, allow_calls=True)
    data = json.loads(render_json(report(outcome, skipped()), options))
    first, second = data["requests"]
    assert first["summarizer"] == {
        "calls": 2, "cache_hits": 0, "failures": 0, "cache_errors": 0, "prompt_tokens": 321,
        "completion_tokens": 0, "tokens_saved": 0, "errors": ["boom"],
    }  # fmt: skip
    assert (first["utilization"], first["utilization_by_curator"]) == (None, {})
    assert first["diff"] == "\n".join(diff_lines(MESSAGES, MESSAGES[2:]))
    assert second["diff"] == "(no difference)"  # skipped: the curated request is the original
    assert data["summaries_are_placeholders"] is False


def test_the_json_report_keeps_non_ascii_text() -> None:
    outcome = SimulatedRequest(Request(1, {"model": "模型", "messages": []}), None, "p", BUDGET, 0)
    text = render_json(report(outcome), Options(input="x"))
    assert '"model": "模型"' in text


# -- an invariant ----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, 40)))
def test_index_runs_expand_back_to_the_indexes(indexes: set[int]) -> None:
    """`[2-4, 7]` lists the same indexes as (2, 3, 4, 7), and no two runs touch."""
    text = _indexes(sorted(indexes))
    assert text.startswith("[")
    assert text.endswith("]")
    runs = [part.split("-") for part in text[1:-1].split(", ")] if indexes else []
    expanded = [i for run in runs for i in range(int(run[0]), int(run[-1]) + 1)]
    assert expanded == sorted(indexes)
    assert all(int(b[0]) > int(a[-1]) + 1 for a, b in itertools.pairwise(runs))
