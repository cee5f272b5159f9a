"""audit_render.py: the `curator audit` list table, one record, and its diff, rendered from
plain record dicts, odd and missing fields included."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.messages import SUMMARY_PREFIX
from proxy.cli.audit_render import (
    DIFF_LINES,
    LINE_WIDTH,
    RUN_LINES,
    _compact,
    _result,
    _tokens,
    render_diff,
    render_record,
    render_table,
)
from tests.factories import assistant_calls, call, image_part, system, text_part, tool_result, user

Record = dict[str, Any]

# -- the list table --------------------------------------------------------------------


def test_the_table_aligns_its_columns_and_fills_gaps_with_a_dash() -> None:
    rows = [
        {
            "time": 1.5, "id": "a1", "kind": "chat", "route": "agents", "policy": "p",
            "model": "gpt-4o", "status": 200, "tokens_before": 1200, "tokens_after": 300,
            "actions": [
                {"curator": "turn_window", "indexes": [1, 2]},
                {"curator": "tool_result_truncation", "indexes": [3]},
                {"curator": "turn_window", "indexes": []},
            ],
        },
        {"id": "b2", "skip_reason": "invalid_json", "status": 400},
    ]  # fmt: skip
    assert render_table(rows).splitlines() == [
        "TIME  ID  KIND  ROUTE   POLICY  MODEL   STATUS  TOKENS       RESULT",
        "1.5   a1  chat  agents  p       gpt-4o  200     1200 -> 300  "
        "turn_window=3,tool_result_truncation=1",
        "-     b2  -     -       -       -       400     -            skipped: invalid_json",
    ]


def test_an_empty_table_is_its_header() -> None:
    assert render_table([]) == "TIME  ID  KIND  ROUTE  POLICY  MODEL  STATUS  TOKENS  RESULT"


@pytest.mark.parametrize(
    ("record", "shown"),
    [
        ({}, "-"),
        ({"tokens_after": 5}, "-"),
        ({"tokens_before": 7}, "7"),
        ({"tokens_before": 7, "tokens_after": None}, "7"),
        ({"tokens_before": 7, "tokens_after": 7}, "7"),
        ({"tokens_before": 7, "tokens_after": 3}, "7 -> 3"),
        ({"tokens_before": 0, "tokens_after": 0}, "0"),
    ],
)
def test_tokens_show_a_change_only_when_there_is_one(record: Record, shown: str) -> None:
    assert _tokens(record) == shown


@pytest.mark.parametrize(
    ("record", "shown"),
    [
        ({}, "unchanged"),
        ({"actions": None, "skip_reason": ""}, "unchanged"),
        ({"skip_reason": "too_large", "actions": [{"curator": "a"}]}, "skipped: too_large"),
        ({"actions": [{"curator": "a", "indexes": None}, {}]}, "a=1,None=1"),
        ({"actions": [{"curator": "b", "indexes": [4, 5, 6]}, {"curator": "a"}]}, "b=3,a=1"),
    ],
)
def test_the_result_counts_messages_per_curator_in_order(record: Record, shown: str) -> None:
    assert _result(record) == shown


# -- one record ------------------------------------------------------------------------


def test_a_record_shows_its_fields_messages_response_and_error() -> None:
    messages = [
        user("two\nlines", name="ann"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("c1", "ls", {}),
                {"function": {"name": "cat", "arguments": "x"}},
                "bad",
                {"id": "c3", "function": "nope"},
            ],
        },
        tool_result("c1", [text_part("out"), image_part()]),
        "odd",
    ]
    record = {
        "id": "r1", "time": 12.5, "kind": "chat", "route": "agents", "policy": None,
        "model": "gpt-4o", "status": 200, "latency_ms": 12, "note": "not a shown key",
        "tokens_before": 100, "tokens_after": 100, "actions": [],
        "original": messages, "curated": list(messages),
        "response": {
            "finish_reason": "stop", "usage": {"prompt_tokens": 5}, "text": "Done.\nBye.",
            "tool_calls": [call("c9", "ls", {})],
        },
        "error": {"code": "upstream_timeout"},
    }  # fmt: skip
    assert render_record(record).splitlines() == [
        "id:             r1",
        "time:           12.5",
        "kind:           chat",
        "route:          agents",
        "policy:         -",
        "model:          gpt-4o",
        "status:         200",
        "latency_ms:     12",
        "tokens:         100",
        "original messages (4):",
        "  [0] user name=ann:",
        "      two",
        "      lines",
        "  [1] assistant:",
        "      -> ls({}) id=c1",
        "      -> cat(x) id=-",
        "  [2] tool tool_call_id=c1:",
        "      out",
        "      [image_url part]",
        "  [3] 'odd'",
        "curated messages: the same as the original",
        'response (finish: stop, usage: {"prompt_tokens":5}):',
        "    Done.",
        "    Bye.",
        "    -> ls({}) id=c9",
        'error: {"code":"upstream_timeout"}',
    ]


def test_an_empty_record_still_prints() -> None:
    assert render_record({}).splitlines() == [
        "tokens:         -",
        "original messages (0):",
        "curated messages: the same as the original",
    ]


def test_a_curated_record_shows_actions_and_both_message_lists() -> None:
    record = {
        "skip_reason": None,
        "tokens_before": 20,
        "tokens_after": 10,
        "actions": [
            {"curator": "turn_window", "kind": "drop", "indexes": [0, 1], "tokens_removed": 10,
             "reason": "old"},
            {"curator": "odd"},
        ],
        "original": [user("a"), user("b"), user("c")],
        "curated": [user("c")],
        "response": {"text": None},
    }  # fmt: skip
    assert render_record(record).splitlines() == [
        "skip_reason:    -",
        "tokens:         20 -> 10",
        "actions:",
        "  turn_window drop [0, 1] -10 tokens: old",
        "  odd None [] -None tokens: None",
        "original messages (3):",
        "  [0] user:",
        "      a",
        "  [1] user:",
        "      b",
        "  [2] user:",
        "      c",
        "curated messages (1):",
        "  [0] user:",
        "      c",
        "response (finish: None, usage: null):",
    ]


def test_a_response_that_is_not_an_object_and_a_null_error_are_not_shown() -> None:
    record = {"response": "raw text", "error": None}
    assert render_record(record).splitlines()[-1] == "curated messages: the same as the original"


# -- the diff --------------------------------------------------------------------------


def test_the_diff_blames_each_change_on_its_curator() -> None:
    calls = [call("c1", "ls", {"d": 1}), call("c2", "cat", {"f": "a"})]
    summary = {"role": "user", "content": SUMMARY_PREFIX + "]: q1"}
    original = [
        system("sys"),
        user("q1"),
        assistant_calls(*calls, content="Calling"),
        tool_result("c1", "a\nb\nc"),
        user("q2"),
    ]
    curated = [
        original[0],
        summary,
        {**original[2], "tool_calls": calls[:1]},
        tool_result("c1", "a\n[cut]"),
        original[4],
    ]
    actions = [
        {"curator": "summarizer", "kind": "summarize", "indexes": [1], "tokens_removed": 10,
         "reason": "old"},
        {"curator": "tool_pair_coherence", "kind": "repair", "indexes": [2], "tokens_removed": 5,
         "reason": "unanswered"},
        {"curator": "tool_result_truncation", "kind": "truncate", "indexes": [3],
         "tokens_removed": 3, "reason": "long"},
    ]  # fmt: skip
    record = {
        "id": "d1", "route": "agents", "policy": "coding", "tokens_before": 500,
        "tokens_after": 200, "original": original, "curated": curated, "actions": actions,
    }  # fmt: skip
    assert render_diff(record).splitlines() == [
        "d1  route=agents  policy=coding",
        "tokens 500 -> 200, messages 5 -> 5",
        "actions:",
        "  summarizer summarize [1] -10 tokens: old",
        "  tool_pair_coherence repair [2] -5 tokens: unanswered",
        "  tool_result_truncation truncate [3] -3 tokens: long",
        "  [1] user         dropped    2 chars  by summarizer",
        # The text and both calls' arguments: 7 + 8 + 10, then 7 + 8.
        "  [2] assistant    shortened  25 -> 15 chars  by tool_pair_coherence",
        "      (text unchanged; tool calls differ)",
        "  [3] tool         shortened  5 -> 7 chars  by tool_result_truncation",
        "      kept the first 2 and the last 0 chars",
        "      --- original[3]",
        "      +++ curated[3]",
        "      @@ -1,3 +1,2 @@",
        "       a",
        "      -b",
        "      -c",
        "      +[cut]",
        f"  summary inserted as curated[1]: {len(summary['content'])} chars",
        "2 of 5 messages unchanged",
    ]


def test_a_skipped_record_with_nothing_in_it() -> None:
    assert render_diff({"id": "x", "skip_reason": "invalid_json"}).splitlines() == [
        "x  route=None  policy=None",
        "tokens -, messages 0 -> 0",
        "curation was skipped: invalid_json",
        "0 of 0 messages unchanged",
    ]


def test_odd_messages_are_dropped_by_size_and_new_ones_shown_as_inserted() -> None:
    original = ["odd", user("a"), user("b")]
    record = {"id": "o", "original": original, "curated": [user("a"), user("new")]}
    assert render_diff(record).splitlines()[2:] == [
        "  [0] ?            dropped    3 chars",
        "  [2] user         dropped    1 chars",
        "  message inserted as curated[1]: 3 chars",
        "1 of 3 messages unchanged",
    ]


def test_an_odd_original_message_in_a_list_as_long_as_the_curated_one() -> None:
    """An original message that is no object, in a list as long as the curated one (the
    replay's shape check passes), still prints: it aligns plainly."""
    record = {"id": "o", "original": ["odd", user("a")], "curated": [user("a"), user("new")]}
    assert render_diff(record).splitlines()[2:] == [
        "  [0] ?            dropped    3 chars",
        "  message inserted as curated[1]: 3 chars",
        "1 of 2 messages unchanged",
    ]


def test_a_long_text_diff_is_compacted_cut_and_limited() -> None:
    before = "\n".join(["head", *(f"old{i}" for i in range(10)), "tail"])
    after = "head\n[10 lines removed]\ntail"
    record = {"id": "c", "original": [user(before)], "curated": [user(after)]}
    assert render_diff(record).splitlines()[2:] == [
        f"  [0] user         shortened  {len(before)} -> {len(after)} chars",
        "      kept the first 5 and the last 5 chars",
        "      --- original[0]",
        "      +++ curated[0]",
        "      @@ -1,12 +1,3 @@",
        "       head",
        "      -old0",
        "      -old1",
        "      -old2",
        "      -... 7 more lines",
        "      +[10 lines removed]",
        "       tail",
        "0 of 1 messages unchanged",
    ]


def test_diff_lines_are_cut_at_the_line_width_and_their_number_limited() -> None:
    # Every other line changes, so there is no run to compact; the common last line keeps
    # the curated text recognisably the original's.
    tail = "\n" + "z" * 40
    before = "\n".join(f"same{i}" if i % 2 else f"old{i}" for i in range(20)) + tail
    after = "\n".join(f"same{i}" if i % 2 else f"new{i}" for i in range(20)) + tail
    lines = render_diff({"original": [user(before)], "curated": [user(after)]}).splitlines()
    assert lines[2:4] == [
        "  [0] user         shortened  160 -> 160 chars",
        "      kept the first 0 and the last 50 chars",
    ]
    body = lines[4:-1]
    # 2 file lines, the hunk line, 10 changed pairs and 10 context lines: 33 in all.
    assert len(body) == DIFF_LINES + 1
    assert body[:6] == [
        "      --- original[0]",
        "      +++ curated[0]",
        "      @@ -1,20 +1,20 @@",
        "      -old0",
        "      +new0",
        "       same1",
    ]
    assert body[-2:] == ["       same13", f"      ... {33 - DIFF_LINES} more diff lines"]


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (LINE_WIDTH - 1, "-" + "x" * (LINE_WIDTH - 1)),  # a diff line of LINE_WIDTH: whole
        (LINE_WIDTH, "-" + "x" * (LINE_WIDTH - 4) + "..."),  # one more: cut to the width
    ],
)
def test_diff_lines_are_cut_at_the_line_width(size: int, shown: str) -> None:
    record = {"original": [user("x" * size)], "curated": [user("[cut]")]}
    lines = render_diff(record).splitlines()
    assert lines[7:9] == ["      " + shown, "      +[cut]"]
    assert len(shown) == LINE_WIDTH


@pytest.mark.parametrize(("length", "compacted"), [(RUN_LINES + 1, False), (RUN_LINES + 2, True)])
def test_runs_longer_than_a_few_lines_are_compacted(length: int, compacted: bool) -> None:
    run = [f"+line{i}" for i in range(length)]
    diff = ["@@ -1 +1 @@", *run, " end"]
    expected = [*run[:RUN_LINES], f"+... {length - RUN_LINES} more lines"] if compacted else run
    assert _compact(diff) == ["@@ -1 +1 @@", *expected, " end"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["-", "+", " ", "@"]), max_size=40))
def test_compacting_keeps_every_line_accounted_for(marks: list[str]) -> None:
    """No run of removed, added or context lines longer than the limit is left, and every
    line of the input is either kept in place or counted in its run's `... N more lines`."""
    diff = [f"{mark}{i}" for i, mark in enumerate(marks)]
    out = _compact(diff)
    counted = 0
    for mark, group in itertools.groupby(out, key=lambda line: line[:1]):
        run = list(group)
        if mark in "-+ ":
            assert len(run) <= RUN_LINES + 1
        for line in run:
            if line.startswith(f"{mark}... "):
                counted += int(line.split()[1])
            else:
                counted += 1
                assert line in diff
    assert counted == len(diff)
    assert [line for line in out if "..." not in line] == [line for line in diff if line in out]
