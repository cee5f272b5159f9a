"""Which original message became which curated one, and which curators touched it."""

from __future__ import annotations

from typing import Any

from proxy.observability.audit.alignment import align, common_prefix, curators, match, replay
from tests import factories as f

ORIGINAL = [
    f.system("Be terse."),
    f.user("Fix it."),
    f.assistant_calls(f.call("c1", "read")),
    f.tool_result("c1", "x" * 400),
    f.user("And now?"),
]


def action(curator: str, kind: str, *indexes: int) -> dict[str, Any]:
    return {"curator": curator, "kind": kind, "indexes": list(indexes)}


def test_the_chain_is_replayed_so_later_indexes_point_at_the_right_message() -> None:
    actions = [
        action("tool_result_truncation", "truncate", 3),
        action("token_budget", "drop", 1, 2, 3),  # indexes of the budget's own input
        action("summarizer_like", "truncate", 1),  # after the drop: index 1 is "And now?"
    ]
    blame, kept = replay(len(ORIGINAL), actions)
    assert kept == [0, 4]
    assert [a["curator"] for a in blame[3]] == ["tool_result_truncation", "token_budget"]
    assert [a["curator"] for a in blame[4]] == ["summarizer_like"]


def test_a_summary_takes_the_place_of_what_it_replaced() -> None:
    _, kept = replay(len(ORIGINAL), [action("summarizer", "summarize", 1, 2, 3)])
    assert kept == [0, None, 4]


def test_match_uses_the_replay_when_the_messages_agree() -> None:
    cut = {**ORIGINAL[3], "content": "x" * 100 + "[... cut ...]"}
    record = {
        "original": ORIGINAL,
        "curated": [ORIGINAL[0], ORIGINAL[1], ORIGINAL[2], cut, ORIGINAL[4]],
        "actions": [action("tool_result_truncation", "truncate", 3)],
    }
    blame, mapping = match(record)
    assert mapping == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}
    assert list(blame) == [3]


def test_without_telling_actions_messages_are_aligned_in_order() -> None:
    curated = [ORIGINAL[0], ORIGINAL[4]]
    assert align(ORIGINAL, curated) == {0: 0, 4: 1}
    blame, mapping = match({"original": ORIGINAL, "curated": curated, "actions": ["odd"]})
    assert (blame, mapping) == ({}, {0: 0, 4: 1})


def test_curators_are_named_once_in_order() -> None:
    actions = [action("a", "drop", 1), action("b", "drop", 1), action("a", "drop", 2)]
    assert curators(actions) == ["a", "b"]


def test_common_prefix_of_long_texts() -> None:
    a = "y" * 100_000 + "tail one"
    b = "y" * 100_000 + "tail two"
    assert common_prefix(a, b) == 100_005
    assert common_prefix("", "abc") == 0
    assert common_prefix("same", "same") == 4
