"""Tool definitions against the prompt_tokens OpenAI's API reported for them.

The counts below are published measurements, not this code's output: the cookbook's
"How to count tokens with tiktoken" (section 7), and the API answers recorded by the
openai-chat-tokens project for gpt-3.5-turbo (cl100k_base), including nested objects,
enums, arrays of objects and descriptions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.tokens import TokenCounter
from policies.tool_render import render_tools
from policies.tooldefs import (
    OPEN_TEMPLATE_TOKENS,
    TOOLS_MESSAGE,
    tool_definition_tokens,
)

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
JOINED_SYSTEM_SAVING = 4
"""What the API reports fewer when the request already has a system message (measured):
the count does not assume one, so it is this much high then."""
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]
HELLO = [{"role": "user", "content": "hello"}]
RECIPE = {
    "name": "get_recipe",
    "parameters": {
        "type": "object",
        "required": ["ingredients", "instructions", "time_to_cook"],
        "properties": {
            "ingredients": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "unit", "amount"],
                    "properties": {
                        "name": {"type": "string"},
                        "unit": {
                            "enum": ["grams", "ml", "cups", "pieces", "teaspoons"],
                            "type": "string",
                        },
                        "amount": {"type": "number"},
                    },
                },
            },
            "instructions": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Steps to prepare the recipe (no numbering)",
            },
            "time_to_cook": {
                "type": "number",
                "description": "Total time to prepare the recipe in minutes",
            },
        },
    },
}


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def function(name: str, description: str = "", **parameters: Any) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "parameters": parameters or obj()}
    if description:
        fn["description"] = description
    return {"type": "function", "function": fn}


@pytest.mark.parametrize(
    ("model", "prompt_tokens"),
    [("gpt-3.5-turbo", 105), ("gpt-4", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)],
)
def test_cookbook_tools_example(exact: TokenCounter, model: str, prompt_tokens: int) -> None:
    # The request has a system message, which the tools section joins: the API reports
    # JOINED_SYSTEM_SAVING fewer than the count, which does not assume one.
    total = exact.count_messages(WEATHER_MESSAGES, model) + exact.count_tools([WEATHER_TOOL], model)
    assert total == prompt_tokens + JOINED_SYSTEM_SAVING


BARE = obj()
BING = {"name": "bing_bong", "description": "Do a bing bong"}
MEASURED = [
    ({"name": "foo", "parameters": BARE}, 31),
    ({"name": "foo", "description": "Do a foo", "parameters": BARE}, 36),
    (BING | {"parameters": obj(foo={"type": "string"})}, 49),
    (
        BING
        | {
            "parameters": obj(
                foo={"type": "string"}, bar={"type": "number", "description": "A number"}
            )
        },
        57,
    ),
    (
        BING
        | {
            "parameters": obj(
                foo=obj(bar={"type": "string", "enum": ["a", "b", "c"]}, baz={"type": "boolean"})
            )
        },
        68,
    ),
    (RECIPE, 106),
]


@pytest.mark.parametrize(("fn", "prompt_tokens"), MEASURED)
def test_measured_gpt35_function_definitions(
    exact: TokenCounter, fn: dict[str, Any], prompt_tokens: int
) -> None:
    # No system message: the count is exact. The old cookbook constants said 23..91 here.
    tools = [{"type": "function", "function": fn}]
    total = exact.count_messages(HELLO, "gpt-3.5-turbo") + exact.count_tools(tools, "gpt-3.5-turbo")
    assert total == prompt_tokens


def test_the_count_is_the_rendered_text_plus_its_message() -> None:
    tools = [WEATHER_TOOL, function("other", "Something else")]
    assert tool_definition_tokens(tools, len) == len(render_tools(tools)) + TOOLS_MESSAGE
    assert tool_definition_tokens([], len) == 0


def test_counter_uses_the_models_encoding_and_caches(exact: TokenCounter) -> None:
    tools = [WEATHER_TOOL, function("other", "Something else")]
    text = render_tools(tools)
    for model in ("gpt-4o", "gpt-4"):
        enc = exact.encoder(model)
        direct = len(enc.encode_ordinary(text)) + TOOLS_MESSAGE
        assert exact.count_tools(tools, model) == direct
        assert exact.count_tools([dict(t) for t in tools], model) == direct  # from the cache
    assert exact.count_tools([], "gpt-4o") == 0


def test_open_models_count_the_tools_as_indented_json_when_that_is_more(
    exact: TokenCounter,
) -> None:
    # vLLM's Llama 3.x template shows each tool as json.dumps(tool, indent=4) after its
    # instructions; OpenAI's rendering is much terser, so an open model gets the JSON count.
    model = "meta-llama/Llama-3.1-8B-Instruct"
    enc = exact.encoder(model)
    dumped = json.dumps(WEATHER_TOOL, indent=4)
    expected = len(enc.encode_ordinary(dumped)) + OPEN_TEMPLATE_TOKENS
    assert exact.follows_openai("gpt-4o")
    assert not exact.follows_openai(model)
    assert exact.count_tools([WEATHER_TOOL], model) == expected
    openai_count = len(enc.encode_ordinary(render_tools([WEATHER_TOOL]))) + TOOLS_MESSAGE
    assert expected > openai_count


def test_open_models_never_count_less_than_the_openai_rendering() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]

    def namespace_heavy(text: str) -> int:
        return 10_000 if "namespace functions" in text else 1

    assert tool_definition_tokens(tools, namespace_heavy, openai=False) == 10_000 + TOOLS_MESSAGE
    assert tool_definition_tokens(tools, namespace_heavy) == 10_000 + TOOLS_MESSAGE
    assert tool_definition_tokens(tools, len, openai=False) > tool_definition_tokens(tools, len)
