"""Tokens taken by a request's tool definitions (OpenAI cookbook, `num_tokens_for_tools`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.tokens import Encoder


@dataclass(frozen=True, slots=True)
class ToolConstants:
    func_init: int
    prop_init: int
    prop_key: int
    enum_init: int
    enum_item: int
    func_end: int


# gpt-4o and newer (o200k_base) vs gpt-4 / gpt-3.5 (cl100k_base), per the cookbook.
O200K = ToolConstants(func_init=7, prop_init=3, prop_key=3, enum_init=-3, enum_item=3, func_end=12)
CL100K = ToolConstants(
    func_init=10, prop_init=3, prop_key=3, enum_init=-3, enum_item=3, func_end=12
)


def tool_definition_tokens(tools: Sequence[Mapping[str, Any]], enc: Encoder, model: str) -> int:
    del model  # the constants follow the encoding, which already reflects the model
    if not tools:
        return 0
    k = CL100K if enc.name == "cl100k_base" else O200K
    n = 0
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        n += k.func_init + _len(enc, f"{_str(fn.get('name'))}:{_strip_dot(fn.get('description'))}")
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        if isinstance(props, Mapping) and props:
            n += k.prop_init
            for key, prop in props.items():
                n += k.prop_key
                prop = prop if isinstance(prop, Mapping) else {}
                enum = prop.get("enum")
                if isinstance(enum, list):
                    n += k.enum_init
                    for item in enum:
                        n += k.enum_item + _len(enc, str(item))
                line = f"{key}:{_str(prop.get('type'))}:{_strip_dot(prop.get('description'))}"
                n += _len(enc, line)
    return n + k.func_end


def _str(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _strip_dot(value: object) -> str:
    text = _str(value)
    return text[:-1] if text.endswith(".") else text


def _len(enc: Encoder, text: str) -> int:
    return len(enc.encode_ordinary(text))
