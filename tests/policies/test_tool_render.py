"""The namespace text OpenAI makes of tool definitions, written out by hand from its rules."""

from __future__ import annotations

from typing import Any

from policies.tool_render import FOOTER, HEADER, render_tools


def obj(required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def tool(name: str, parameters: Any = None, description: str | None = None) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name}
    if description is not None:
        fn["description"] = description
    if parameters is not None:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


def body(*tools: dict[str, Any]) -> str:
    text = render_tools(tools)
    assert text.startswith(HEADER)
    assert text.endswith(FOOTER)
    return text[len(HEADER) : -len(FOOTER)]


def test_the_section_around_the_functions() -> None:
    assert render_tools([]) == ""
    assert render_tools([tool("f")]) == (
        "# Tools\n\n## functions\n\nnamespace functions {\n\n"
        "type f = () => any;\n\n"
        "} // namespace functions"
    )


def test_a_function_without_properties_takes_no_argument() -> None:
    assert body(tool("f", obj(), "Does f")) == "// Does f\ntype f = () => any;\n\n"


def test_required_optional_descriptions_and_enums() -> None:
    params = obj(
        ("location",),
        location={"type": "string", "description": "The city"},
        unit={"type": "string", "enum": ["celsius", "fahrenheit"]},
        days={"type": "integer", "enum": [1, 7]},
    )
    assert body(tool("weather", params, "Get it")) == (
        "// Get it\n"
        "type weather = (_: {\n"
        "// The city\n"
        "location: string,\n"
        'unit?: "celsius" | "fahrenheit",\n'
        "days?: 1 | 7,\n"
        "}) => any;\n\n"
    )


def test_nested_objects_are_inline_and_indented_arrays_get_brackets() -> None:
    params = obj(
        to=obj(("city",), city={"type": "string", "description": "Where"}, zip={"type": "number"}),
        tags={"type": "array", "items": {"type": "string"}},
        rows={"type": "array", "items": obj(n={"type": "boolean"})},
        anything={"type": "array"},
    )
    assert body(tool("ship", params)) == (
        "type ship = (_: {\n"
        "to?: {\n"
        "  // Where\n"
        "  city: string,\n"
        "  zip?: number,\n"
        "},\n"
        "tags?: string[],\n"
        "rows?: {\n"
        "  n?: boolean,\n"
        "}[],\n"
        "anything?: any[],\n"
        "}) => any;\n\n"
    )


def test_defaults_titles_examples_and_unknown_keywords_become_comments() -> None:
    params = obj(
        n={"type": "integer", "title": "Count", "default": 5, "minimum": 1},
        q={"type": "string", "examples": ["cats"], "default": "all"},
    )
    assert body(tool("f", params)) == (
        "type f = (_: {\n"
        "// Count\n"
        "//\n"
        "n?: number, // default: 5 minimum: 1\n"
        "// Examples:\n"
        '// - "cats"\n'
        'q?: string, // default: "all"\n'
        "}) => any;\n\n"
    )


def test_multi_line_descriptions_are_commented_line_by_line() -> None:
    assert body(tool("f", description="One.\nTwo.")) == "// One.\n// Two.\ntype f = () => any;\n\n"


def test_unions_refs_nullable_and_type_lists() -> None:
    params = obj(
        a={"anyOf": [{"type": "string"}, {"type": "null"}]},
        b={"$ref": "#/$defs/Point"},
        c={"type": "string", "nullable": True},
        d={"type": ["integer", "null"]},
        e={"$ref": "#/$defs/missing"},
        f={"type": "object", "additionalProperties": {"type": "number"}},
    )
    params["$defs"] = {"Point": obj(x={"type": "number"})}
    assert body(tool("g", params)) == (
        "type g = (_: {\n"
        "a?: string | null,\n"
        "b?: {\n"
        "  x?: number,\n"
        "},\n"
        "c?: string | null,\n"
        "d?: number | null,\n"
        "e?: any,\n"
        "f?: Record<string, number>,\n"
        "}) => any;\n\n"
    )


def test_custom_tools_take_a_string_and_show_their_grammar() -> None:
    custom = {
        "type": "custom",
        "custom": {
            "name": "sql",
            "description": "Runs SQL.",
            "format": {"type": "grammar", "grammar": {"definition": "start: query"}},
        },
    }
    assert body(custom) == "// Runs SQL.\n// start: query\ntype sql = (_: string) => any;\n\n"


def test_malformed_definitions_never_raise() -> None:
    tools: list[Any] = [
        42,
        {"type": "function"},
        {"type": "function", "function": "nope"},
        {"type": "function", "function": {"parameters": "nope"}},
        {"type": "function", "function": {"parameters": {"properties": {"x": 5}}}},
    ]
    assert body(*tools) == "type  = () => any;\n\ntype  = (_: {\nx?: any,\n}) => any;\n\n"


def test_cyclic_schemas_terminate() -> None:
    params: dict[str, Any] = obj(me={"$ref": "#/$defs/Node"})
    params["$defs"] = {"Node": obj(next={"$ref": "#/$defs/Node"})}
    text = render_tools([tool("loop", params)])
    assert text.count("next?:") > 3
    assert "any" in text


def test_definitions_that_refer_to_each_other_many_times_stay_bounded() -> None:
    # Three references per level would render 3**16 copies without the cap.
    node = obj(a={"$ref": "#/$defs/N"}, b={"$ref": "#/$defs/N"}, c={"$ref": "#/$defs/N"})
    params: dict[str, Any] = obj(root={"$ref": "#/$defs/N"})
    params["$defs"] = {"N": node}
    text = render_tools([tool("bomb", params)])
    assert len(text) < 200_000
    assert text.count("?: {") > 100  # expanded up to the cap
