"""Tool definitions as OpenAI puts them in the prompt: a TypeScript-like namespace.

OpenAI does not send the JSON schema to the model. It renders the `tools` list into the
system prompt:

    # Tools

    ## functions

    namespace functions {

    // Get the current weather in a given location
    type get_current_weather = (_: {
    // The city and state, e.g. San Francisco, CA
    location: string,
    unit?: "celsius" | "fahrenheit",
    }) => any;

    } // namespace functions

Where this comes from, and how sure it is:
- The layout above (header, comments, `?` for optional, enums as unions, nested objects
  inline and indented, arrays as `T[]`, `() => any` without parameters) reproduces the
  `prompt_tokens` OpenAI's API reported in the cookbook's tools example (gpt-4o, gpt-4,
  gpt-3.5-turbo) and in public measurements of nested schemas, token for token.
- OpenAI's open renderer for gpt-oss (`openai/harmony`) adds `// default: x` after a
  property, titles and examples as comments, and `oneOf` as unions; those are rendered
  the same way here.
- Keywords with no published rendering (minimum, pattern, format, ...) are kept as a
  trailing comment, and a multi-line description gets `// ` on every line: when the real
  rule is unknown the count errs high, never low.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

MAX_DEPTH = 16
"""Schemas nest this deep at most in practice; the cap stops cycles through `$ref`."""
INDENT = "  "
HEADER = "# Tools\n\n## functions\n\nnamespace functions {\n\n"
FOOTER = "} // namespace functions"
CONSTRAINTS = (
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
"""Keywords kept as a comment, because no public rendering says whether OpenAI shows them."""
_TYPES = {"integer": "number", "number": "number", "string": "string", "boolean": "boolean"}
_TYPES |= {"null": "null"}

MAX_REFS = 512
"""`$ref`s expanded per function: a schema whose definitions refer to each other several
times over would otherwise render exponentially large text."""
Schema = Mapping[str, Any]


class _Walk:
    """One function's definitions, and how many more `$ref`s may be expanded."""

    __slots__ = ("defs", "refs_left")

    def __init__(self, defs: Schema) -> None:
        self.defs = defs
        self.refs_left = MAX_REFS

    def resolve(self, ref: str) -> object:
        if self.refs_left <= 0:
            return None
        self.refs_left -= 1
        return self.defs.get(ref)


def render_tools(tools: Sequence[object]) -> str:
    """The prompt text OpenAI makes of a request's `tools` ("" for none)."""
    if not tools:
        return ""
    blocks = [_render_tool(tool) for tool in tools]
    return HEADER + "".join(b for b in blocks if b) + FOOTER


def _render_tool(tool: object) -> str:
    if not isinstance(tool, Mapping):
        return ""
    fn = tool.get("function")
    if isinstance(fn, Mapping):
        return _function(fn)
    custom = tool.get("custom")
    if isinstance(custom, Mapping):
        return _custom(custom)
    return ""


def _function(fn: Schema) -> str:
    name = _text(fn.get("name"))
    head = _comment_lines(fn.get("description"), "")
    params = fn.get("parameters")
    if not isinstance(params, Mapping) or not (params.get("properties") or _is_composite(params)):
        return f"{head}type {name} = () => any;\n\n"
    walk = _Walk(_defs(params))
    if isinstance(params.get("properties"), Mapping):
        body = _properties(params, "", walk, 0)
        return f"{head}type {name} = (_: {{\n{body}}}) => any;\n\n"
    return f"{head}type {name} = (_: {_type(params, '', walk, 0)}) => any;\n\n"


def _custom(custom: Schema) -> str:
    """Free-form tools take a string; their grammar, if any, is shown to the model."""
    head = _comment_lines(custom.get("description"), "")
    fmt = custom.get("format")
    if isinstance(fmt, Mapping):
        grammar = fmt.get("grammar")
        definition = grammar.get("definition") if isinstance(grammar, Mapping) else None
        head += _comment_lines(definition, "")
    return f"{head}type {_text(custom.get('name'))} = (_: string) => any;\n\n"


def _properties(schema: Schema, indent: str, walk: _Walk, depth: int) -> str:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out: list[str] = []
    for key, prop in props.items():
        if not isinstance(prop, Mapping):
            out.append(f"{indent}{key}{'' if key in needed else '?'}: any,\n")
            continue
        out.append(_property(str(key), prop, key in needed, indent, walk, depth))
    return "".join(out)


def _property(key: str, prop: Schema, required: bool, indent: str, walk: _Walk, depth: int) -> str:
    lines = ""
    title = prop.get("title")
    if isinstance(title, str) and title:
        lines += f"{indent}// {title}\n{indent}//\n"
    lines += _comment_lines(prop.get("description"), indent)
    examples = prop.get("examples")
    if isinstance(examples, list) and examples:
        lines += f"{indent}// Examples:\n"
        lines += "".join(f"{indent}// - {_literal(ex)}\n" for ex in examples)
    mark = "" if required else "?"
    line = f"{indent}{key}{mark}: {_type(prop, indent, walk, depth + 1)},"
    notes = _notes(prop)
    return lines + line + (f" // {notes}" if notes else "") + "\n"


def _type(schema: object, indent: str, walk: _Walk, depth: int) -> str:
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _type(walk.resolve(ref), indent, walk, depth + 1)
    text = _plain_type(schema, indent, walk, depth)
    if schema.get("nullable") is True and "null" not in text:
        text += " | null"
    return text


def _plain_type(schema: Schema, indent: str, walk: _Walk, depth: int) -> str:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(_literal(v) for v in enum)
    if "const" in schema:
        return _literal(schema["const"])
    for key, glue in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
        variants = schema.get(key)
        if isinstance(variants, list) and variants:
            return _union(variants, glue, indent, walk, depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(k, "any") if isinstance(k, str) else "any" for k in kind)
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping)):
        return _object(schema, indent, walk, depth)
    if kind == "array":
        items = schema.get("items")
        return f"{_type(items, indent, walk, depth + 1)}[]" if items is not None else "any[]"
    return _TYPES.get(kind, "any") if isinstance(kind, str) else "any"


def _object(schema: Schema, indent: str, walk: _Walk, depth: int) -> str:
    props = schema.get("properties")
    if isinstance(props, Mapping) and props:
        inner = _properties(schema, indent + INDENT, walk, depth)
        return f"{{\n{inner}{indent}}}"
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return f"Record<string, {_type(extra, indent, walk, depth + 1)}>"
    return "object"


def _union(variants: list[Any], glue: str, indent: str, walk: _Walk, depth: int) -> str:
    parts = [_type(v, indent, walk, depth + 1) for v in variants]
    described = [_text(v.get("description")) for v in variants if isinstance(v, Mapping)]
    text = glue.join(parts)
    notes = " ".join(d for d in described if d)
    return f"{text} /* {notes} */" if notes else text


def _notes(prop: Schema) -> str:
    notes = []
    if "default" in prop:
        notes.append(f"default: {_literal(prop['default'])}")
    notes.extend(f"{k}: {_literal(prop[k])}" for k in CONSTRAINTS if k in prop)
    return " ".join(notes)


def _defs(params: Schema) -> Schema:
    defs: dict[str, Any] = {}
    for group in ("definitions", "$defs"):
        found = params.get(group)
        if isinstance(found, Mapping):
            defs.update({f"#/{group}/{k}": v for k, v in found.items()})
    return defs


def _is_composite(params: Schema) -> bool:
    return any(isinstance(params.get(k), list) for k in ("anyOf", "oneOf", "allOf"))


def _comment_lines(value: object, indent: str) -> str:
    text = _text(value)
    if not text:
        return ""
    return "".join(f"{indent}// {line}\n" for line in _lines(text))


def _lines(text: str) -> Iterable[str]:
    return text.splitlines() or [text]


def _literal(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _literal(value)
