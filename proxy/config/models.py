"""The `models:` section: context windows and encodings for model-name globs."""

from __future__ import annotations

from policies import validate as v
from policies.models import ModelInfo
from policies.validate import Reader, describe, suggest
from policies.yamlsrc import KeyPath

MODEL_KEYS = ("context_window", "max_input_tokens", "encoding")


def read_models(read: Reader, value: object, path: KeyPath) -> list[tuple[str, ModelInfo]]:
    """The `models:` section: (glob, what it says of the models it matches), in file order."""
    import tiktoken  # only for the names it knows: listing them downloads nothing

    encodings = sorted(tiktoken.list_encoding_names())
    found: list[tuple[str, ModelInfo]] = []
    for glob, item, item_path in read.globs(value, path):
        data = read.mapping(item, item_path, MODEL_KEYS)
        if data is None:
            continue
        read.require(data, ("context_window",), item_path)
        window = read.get(data, "context_window", item_path, 0, v.int_in(1))
        max_input = read.get(data, "max_input_tokens", item_path, None, v.int_in(1))
        if max_input is not None and window and max_input > window:
            message = f"must be <= context_window ({window}), got {max_input}"
            read.problems.add((*item_path, "max_input_tokens"), message)
        enc = read.get(data, "encoding", item_path, None, v.optional_text)
        if enc is not None and enc not in encodings:
            choices = f"one of {', '.join(encodings)}"
            message = f"expected {choices}, got {describe(enc)}{suggest(enc, encodings)}"
            read.problems.add((*item_path, "encoding"), message)
            enc = None
        found.append((glob, ModelInfo(window, max_input, enc)))
    return found
