"""Tokens taken by a request's tool definitions (OpenAI cookbook, `num_tokens_for_tools`).

The cookbook prices each function as a fixed overhead plus `name:description`, and each
parameter as a fixed overhead plus `name:type:description` and its enum values. It stops
at the first level of `parameters`; agents' tools nest objects, arrays of objects and
`$defs`, so nested properties are priced by the same rule rather than ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

CountText = Callable[[str], int]
MAX_DEPTH = 16
"""Schemas nest this deep at most in practice; the cap only guards against cycles."""


@dataclass(frozen=True, slots=True)
class ToolConstants:
    """The cookbook's per-encoding overheads (tokens) for rendering tool definitions."""

    func_init: int
    prop_init: int
    prop_key: int
    enum_init: int
    enum_item: int
    func_end: int


O200K = ToolConstants(func_init=7, prop_init=3, prop_key=3, enum_init=-3, enum_item=3, func_end=12)
"""gpt-4o and newer."""
CL100K = ToolConstants(
    func_init=10, prop_init=3, prop_key=3, enum_init=-3, enum_item=3, func_end=12
)
"""gpt-4 and gpt-3.5-turbo."""


def constants_for(encoding: str) -> ToolConstants:
    return CL100K if encoding == "cl100k_base" else O200K


def tool_definition_tokens(
    tools: Sequence[Mapping[str, Any]], count: CountText, k: ToolConstants
) -> int:
    """Tokens for the `tools` list of a request; 0 when there are none."""
    if not tools:
        return 0
    n = k.func_end
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        # Function tools carry a JSON schema; custom (free-form) tools only a name and text.
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            fn = tool.get("custom")
        if isinstance(fn, Mapping):
            n += k.func_init + count(f"{_text(fn.get('name'))}:{_desc(fn.get('description'))}")
            n += _schema_tokens(fn.get("parameters"), count, k, 0)
    return n


def _schema_tokens(schema: object, count: CountText, k: ToolConstants, depth: int) -> int:
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
        return 0
    n = 0
    props = schema.get("properties")
    if isinstance(props, Mapping) and props:
        n += k.prop_init
        for key, prop in props.items():
            n += _property_tokens(str(key), prop, count, k, depth)
    n += _schema_tokens(schema.get("items"), count, k, depth + 1)
    for group in ("$defs", "definitions"):
        defs = schema.get(group)
        if isinstance(defs, Mapping):
            n += sum(_schema_tokens(d, count, k, depth + 1) for d in defs.values())
    return n


def _property_tokens(key: str, prop: object, count: CountText, k: ToolConstants, depth: int) -> int:
    if not isinstance(prop, Mapping):
        return k.prop_key + count(f"{key}::")
    n = k.prop_key
    enum = prop.get("enum")
    if isinstance(enum, list):
        n += k.enum_init + sum(k.enum_item + count(_literal(item)) for item in enum)
    n += count(f"{key}:{_type(prop.get('type'))}:{_desc(prop.get('description'))}")
    return n + _schema_tokens(prop, count, k, depth + 1)


def _literal(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _text(value: object) -> str:
    return "" if value is None else _literal(value)


def _type(value: object) -> str:
    # JSON schema allows a list of types, e.g. ["string", "null"].
    if isinstance(value, list):
        return " | ".join(_text(v) for v in value)
    return _text(value)


def _desc(value: object) -> str:
    text = _text(value)
    return text[:-1] if text.endswith(".") else text
