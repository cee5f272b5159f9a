"""A provider-style prompt cache for the fake upstream, independent of `policies/`.

OpenAI bills the longest prefix of a prompt that it has seen recently as cached input, if
that prefix is at least 1,024 tokens long, in 128-token steps beyond. This fake renders each
prompt into one token sequence (tools, then every message's role and content, as tiktoken
encodes them), finds the longest prefix it shares with any earlier prompt, and reports
`usage.prompt_tokens_details.cached_tokens` from it: a token-level model, not the
block-level one the proxy uses, so figures compared between the two are not circular.
Prompts under distinct `prompt_cache_key`s share nothing (OpenAI routes them apart).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import orjson
import tiktoken

MIN_TOKENS = 1024
INCREMENT = 128
MAX_PROMPTS = 256


class PromptCache:
    """Remembers up to `MAX_PROMPTS` prompts; thread-safe (the fake serves from a thread)."""

    def __init__(self, min_tokens: int = MIN_TOKENS, increment: int = INCREMENT) -> None:
        self.min_tokens = min_tokens
        self.increment = increment
        self._seen: dict[str, list[list[int]]] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()

    def cached(self, body: dict[str, Any], enc: tiktoken.Encoding, prompt_tokens: int) -> int:
        """Cached tokens for this request (at most its prompt tokens); remembers it."""
        tokens = render(body.get("tools"), body["messages"], enc)
        key = body.get("prompt_cache_key")
        with self._lock:
            seen = self._seen.setdefault(key if isinstance(key, str) else "", [])
            shared = max((_common(tokens, earlier) for earlier in seen), default=0)
            seen.append(tokens)
            del seen[:-MAX_PROMPTS]
        if shared < self.min_tokens:
            return 0
        steps = (shared - self.min_tokens) // self.increment
        return min(self.min_tokens + steps * self.increment, prompt_tokens)


def render(tools: object, messages: Sequence[Any], enc: tiktoken.Encoding) -> list[int]:
    tokens: list[int] = []
    if isinstance(tools, list) and tools:
        tokens += enc.encode_ordinary(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode())
    for msg in messages:
        tokens += enc.encode_ordinary(f"<|{msg.get('role')}|>")
        content = msg.get("content")
        text = content if isinstance(content, str) else orjson.dumps(content).decode()
        tokens += enc.encode_ordinary(text)
        if msg.get("tool_calls"):
            tokens += enc.encode_ordinary(orjson.dumps(msg["tool_calls"]).decode())
    return tokens


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
