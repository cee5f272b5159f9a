from __future__ import annotations

from typing import Any

import pytest

from policies.tokens import TokenCounter
from policies.tooldefs import CL100K, O200K, constants_for, tool_definition_tokens

K = O200K
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
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


def chars(text: str) -> int:
    """One token per character: the formula's arithmetic becomes visible."""
    return len(text)


def function(name: str, description: str = "", **parameters: Any) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "description": description}
    if parameters:
        fn["parameters"] = {"type": "object", **parameters}
    return {"type": "function", "function": fn}


@pytest.mark.parametrize(
    ("model", "prompt_tokens"),
    [("gpt-3.5-turbo", 105), ("gpt-4", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)],
)
def test_cookbook_tools_example(exact: TokenCounter, model: str, prompt_tokens: int) -> None:
    # "How to count tokens with tiktoken", section 7: the API reported the same numbers.
    total = exact.count_messages(WEATHER_MESSAGES, model) + exact.count_tools([WEATHER_TOOL], model)
    assert total == prompt_tokens


def test_cookbook_rule_spelled_out() -> None:
    expected = (
        K.func_init
        + chars("get_current_weather:Get the current weather in a given location")
        + K.prop_init
        + K.prop_key
        + chars("location:string:The city and state, e.g. San Francisco, CA")
        + K.prop_key
        + K.enum_init
        + (K.enum_item + chars("celsius"))
        + (K.enum_item + chars("fahrenheit"))
        + chars("unit:string:The unit of temperature to return")
        + K.func_end
    )
    assert tool_definition_tokens([WEATHER_TOOL], chars, K) == expected


def test_constants_follow_the_encoding() -> None:
    assert constants_for("cl100k_base") is CL100K
    assert constants_for("o200k_base") is O200K
    assert constants_for("o200k_harmony") is O200K
    assert CL100K.func_init - O200K.func_init == 3


def test_no_tools_cost_nothing() -> None:
    assert tool_definition_tokens([], chars, K) == 0


def test_one_trailing_period_of_descriptions_is_dropped() -> None:
    plain = tool_definition_tokens([function("f", "Does it")], chars, K)
    assert tool_definition_tokens([function("f", "Does it.")], chars, K) == plain
    assert tool_definition_tokens([function("f", "Does it..")], chars, K) == plain + 1


def test_each_function_pays_its_own_overhead() -> None:
    one = tool_definition_tokens([function("a")], chars, K)
    two = tool_definition_tokens([function("a"), function("b")], chars, K)
    assert one == K.func_init + chars("a:") + K.func_end
    assert two == one + K.func_init + chars("b:")


def test_nested_objects_arrays_and_defs_are_priced_like_top_level_properties() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = function(
        "ship",
        properties={
            "to": address,
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
            },
            "via": {"$ref": "#/$defs/carrier"},
        },
        **{"$defs": {"carrier": {"type": "object", "properties": {"code": {"type": "string"}}}}},
    )
    nested = 3 * (K.prop_init + K.prop_key)  # city, sku, code: each in its own object
    expected = (
        K.func_init
        + chars("ship:")
        + K.prop_init
        + 3 * K.prop_key
        + chars("to:object:")
        + chars("items:array:")
        + chars("via::")
        + nested
        + chars("city:string:")
        + chars("sku:string:")
        + chars("code:string:")
        + K.func_end
    )
    assert tool_definition_tokens([tool], chars, K) == expected


def test_enum_values_and_type_lists_are_rendered_as_json() -> None:
    tool = function(
        "f",
        properties={
            "n": {"type": ["integer", "null"], "enum": [1, True, None]},
        },
    )
    expected = (
        K.func_init
        + chars("f:")
        + K.prop_init
        + K.prop_key
        + K.enum_init
        + 3 * K.enum_item
        + chars("1")
        + chars("true")
        + chars("null")
        + chars("n:integer | null:")
        + K.func_end
    )
    assert tool_definition_tokens([tool], chars, K) == expected


def test_custom_tools_count_name_and_description() -> None:
    tool = {"type": "custom", "custom": {"name": "sql", "description": "Runs SQL."}}
    assert tool_definition_tokens([tool], chars, K) == K.func_init + chars("sql:Runs SQL") + 12


def test_malformed_definitions_never_raise() -> None:
    tools: list[Any] = [
        42,
        {"type": "function"},
        {"type": "function", "function": "nope"},
        {"type": "function", "function": {"parameters": "nope"}},
        {"type": "function", "function": {"parameters": {"properties": {"x": 5}}}},
    ]
    # Only the last two are functions: ":" for each name line, and "x::" for the bad property.
    expected = K.func_end + 2 * (K.func_init + 1) + K.prop_init + K.prop_key + chars("x::")
    assert tool_definition_tokens(tools, chars, K) == expected


def test_cyclic_schemas_terminate() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    tool = {"type": "function", "function": {"name": "loop", "parameters": schema}}
    assert tool_definition_tokens([tool], chars, K) > K.func_end


def test_counter_uses_the_models_encoding_and_constants(exact: TokenCounter) -> None:
    tools = [WEATHER_TOOL, function("other", "Something else")]
    for model, k in (("gpt-4o", O200K), ("gpt-4", CL100K)):
        enc = exact.encoder(model)
        direct = tool_definition_tokens(tools, lambda s, e=enc: len(e.encode_ordinary(s)), k)
        assert exact.count_tools(tools, model) == direct
        assert exact.count_tools([dict(t) for t in tools], model) == direct  # from the cache
    assert exact.count_tools([], "gpt-4o") == 0
