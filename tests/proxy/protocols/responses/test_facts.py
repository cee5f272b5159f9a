"""facts.py: the chat-shaped view of a Responses request its budget reads (model, output
reserve, tools), and how each kind of Responses tool becomes a chat tool definition."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocols.responses.facts import budget_body, chat_tool

Tool = dict[str, Any]

# -- budget_body -----------------------------------------------------------------------


def test_model_reserve_and_tools_become_the_chat_fields() -> None:
    body = {
        "model": "gpt-4.1",
        "input": [{"role": "user", "content": "Hi"}],
        "instructions": "Be brief.",
        "max_output_tokens": 500,
        "tools": [{"type": "function", "name": "ls"}],
        "stream": True,
    }
    assert budget_body(body) == {
        "model": "gpt-4.1",
        "max_completion_tokens": 500,
        "tools": [{"type": "function", "function": {"name": "ls"}}],
    }


def test_an_empty_request_has_only_a_null_model() -> None:
    assert budget_body({}) == {"model": None}


@pytest.mark.parametrize(
    ("reserve", "kept"),
    [(1, True), (0, True), (-3, True), (True, False), (False, False), (2.0, False),
     ("500", False), (None, False)],
)  # fmt: skip
def test_only_an_integer_reserve_is_read(reserve: object, kept: bool) -> None:
    """Whether it is positive is the policy's call (`policies.policy`); a bool is no number."""
    view = budget_body({"model": "m", "max_output_tokens": reserve})
    assert view == ({"model": "m", "max_completion_tokens": reserve} if kept else {"model": "m"})


@pytest.mark.parametrize("tools", [None, [], {}, "ls", {"type": "function", "name": "ls"}])
def test_no_tool_list_means_no_tools_key(tools: object) -> None:
    assert budget_body({"model": "m", "tools": tools}) == {"model": "m"}


def test_tools_that_are_not_objects_are_left_out_in_order() -> None:
    tools = ["ls", {"type": "function", "name": "a"}, None, 3, {"type": "custom", "name": "b"}]
    assert budget_body({"tools": tools})["tools"] == [
        {"type": "function", "function": {"name": "a"}},
        {"type": "custom", "custom": {"name": "b"}},
    ]
    assert budget_body({"tools": ["ls", None]}) == {"model": None, "tools": []}


# -- chat_tool -------------------------------------------------------------------------


def test_a_function_tool_keeps_its_four_fields_under_function() -> None:
    tool = {
        "type": "function",
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        "strict": True,
        "extra": "dropped",
    }
    assert chat_tool(tool) == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "strict": True,
        },
    }


def test_a_function_tools_missing_fields_stay_missing() -> None:
    assert chat_tool({"type": "function"}) == {"type": "function", "function": {}}
    assert chat_tool({"type": "function", "strict": False}) == {
        "type": "function",
        "function": {"strict": False},
    }


def test_a_custom_tool_keeps_name_description_and_format() -> None:
    grammar = {"type": "grammar", "syntax": "lark", "definition": "start: WORD"}
    tool = {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files.",
        "format": grammar,
        "parameters": {"dropped": True},
    }
    assert chat_tool(tool) == {
        "type": "custom",
        "custom": {"name": "apply_patch", "description": "Edit files.", "format": grammar},
    }


def test_a_hosted_tool_is_priced_as_its_json() -> None:
    tool = {"type": "web_search", "search_context_size": "high", "user_location": None}
    assert chat_tool(tool) == {
        "type": "custom",
        "custom": {
            "name": "web_search",
            "description": (
                '{"type":"web_search","search_context_size":"high","user_location":null}'
            ),
        },
    }


@pytest.mark.parametrize(("tool", "name"), [({}, "None"), ({"type": 7}, "7")])
def test_a_tool_without_a_string_type_is_named_by_what_it_has(tool: Tool, name: str) -> None:
    assert chat_tool(tool) == {
        "type": "custom",
        "custom": {"name": name, "description": json.dumps(tool, separators=(",", ":"))},
    }


def test_a_hosted_tools_text_is_kept_as_is() -> None:
    tool = {"type": "mcp", "server_label": "données 🚀", "allowed_tools": ["a", "b"]}
    description = chat_tool(tool)["custom"]["description"]
    assert description == '{"type":"mcp","server_label":"données 🚀","allowed_tools":["a","b"]}'
    assert json.loads(description) == tool


# -- an invariant ----------------------------------------------------------------------


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
KEPT = {
    "function": ("name", "description", "parameters", "strict"),
    "custom": ("name", "description", "format"),
}
tools = st.dictionaries(
    st.sampled_from(["type", "name", "description", "parameters", "strict", "format", "x"]),
    json_values | st.sampled_from(["function", "custom", "web_search"]),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(tools | json_values, max_size=5))
def test_every_object_tool_becomes_one_chat_tool_of_a_chat_type(items: list[Any]) -> None:
    """Every object in `tools` gives one chat tool, in order, that names a function or a
    custom tool and carries none of the Responses tool's other keys."""
    view = budget_body({"model": "m", "tools": items})
    objects = [t for t in items if isinstance(t, dict)]
    if not items:
        assert "tools" not in view
        return
    assert len(view["tools"]) == len(objects)
    for source, tool in zip(objects, view["tools"], strict=True):
        kind = tool["type"]
        assert set(tool) == {"type", kind}
        assert kind == ("function" if source.get("type") == "function" else "custom")
        if source.get("type") in ("function", "custom"):
            kept = KEPT[source["type"]]
            assert tool[kind] == {k: source[k] for k in kept if k in source}
        else:
            assert tool[kind]["name"] == str(source.get("type"))
            assert json.loads(tool[kind]["description"]) == source
