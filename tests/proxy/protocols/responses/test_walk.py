"""The one-walk mapping of the usual Responses item lists: a faster copy of the general
walk (`grouping.Builder` with the `neutral` functions), held to it."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from proxy.protocols.responses import items as items_module
from proxy.protocols.responses import walk
from tests.fakes import responses_items as r

Items = list[dict[str, Any]]

PLAIN_TYPES = (None, "message", "function_call", "function_call_output", "reasoning")


@settings(max_examples=150)
@given(r.conversations(max_steps=10), st.booleans())
def test_the_one_walk_fast_path_maps_as_the_general_walk(items: Items, plain_only: bool) -> None:
    """`one_walk` (messages, function calls, outputs, reasoning) is a faster copy of the
    general walk: where it answers, both give the same groups and messages."""
    if plain_only:  # drop other kinds (calls with their outputs): still a valid list
        items = [item for item in items if item.get("type") in PLAIN_TYPES]
    fast = walk.one_walk(items)
    event("plain" if fast is not None else "general")
    if fast is not None:
        assert fast == items_module._general(items)


def test_other_item_kinds_are_left_to_the_general_walk() -> None:
    assert walk.one_walk([r.user(), r.custom_call("c"), r.custom_output("c")]) is None
    assert walk.one_walk([r.user(), r.hosted("web_search_call")]) is None


def test_lists_the_general_walk_refuses_are_left_to_it() -> None:
    assert walk.one_walk([r.user(), r.function_output("x")]) is None
    assert walk.one_walk([r.user(), r.function_call("x")]) is None
    assert walk.one_walk([r.user(), r.reasoning()]) is None
    assert walk.one_walk([r.user(), "not an item"]) is None
