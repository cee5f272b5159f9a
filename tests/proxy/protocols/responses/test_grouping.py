"""The one walk that groups Responses items into the units one neutral message stands for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from proxy.protocols.responses.grouping import Builder
from proxy.protocols.responses.neutral import primary
from tests.fakes import responses_items as r


def walk(items: Sequence[dict[str, Any]]) -> Builder | str:
    builder = Builder(items)
    for i, item in enumerate(items):
        problem = builder.add(i, item)
        if problem is not None:
            return problem
    return builder.finish() or builder


def grouped(items: Sequence[dict[str, Any]]) -> list[tuple[str, list[int], int]]:
    found = walk(items)
    assert isinstance(found, Builder), found
    shape = zip(found.kinds, found.groups, strict=True)
    return [(k, ids, primary(items, k, ids)) for k, ids in shape]


def test_calls_join_the_assistant_message_they_came_with() -> None:
    items = [
        r.user(),
        r.assistant("Reading both.", 1),
        r.function_call("a"),
        r.function_call("b"),
        r.function_output("b"),
        r.function_output("a"),
    ]
    assert grouped(items) == [
        ("message", [0], 0),
        ("calls", [1, 2, 3], 1),
        ("output", [4], 4),
        ("output", [5], 5),
    ]


def test_calls_alone_have_no_primary_and_reasoning_rides_with_the_next_item() -> None:
    items = [r.user(), r.reasoning(1), r.function_call("a"), r.function_output("a")]
    assert grouped(items) == [("message", [0], 0), ("calls", [1, 2], -1), ("output", [3], 3)]


def test_a_pending_approval_request_is_a_unit_of_its_own() -> None:
    answered = [r.user(), r.approval_request(1), r.approval_response(1)]
    assert [k for k, _, _ in grouped(answered)] == ["message", "calls", "output"]
    pending = [r.user(), r.approval_request(2)]
    assert [k for k, _, _ in grouped(pending)] == ["message", "opaque"]


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([r.user(), r.function_output("x")], "unpaired_output"),
        ([r.user(), r.function_call("x"), r.user()], "unanswered_call"),
        ([r.user(), r.reasoning()], "orphan_reasoning"),
        ([r.function_call("x"), r.reasoning(), r.function_output("x")], "reasoning_before_output"),
    ],
)
def test_lists_chat_cannot_express_are_named(items: list[dict[str, Any]], reason: str) -> None:
    assert walk(items) == reason
