"""A provider-style prompt cache for the fake upstream, independent of `policies/`.

OpenAI bills the longest prefix of a prompt that it has seen recently as cached input, if
that prefix is at least 1,024 tokens long, in 128-token steps beyond. This fake renders each
prompt into one token sequence (tools, then every message's role and content, as tiktoken
encodes them), finds the longest prefix it shares with any earlier prompt, and reports
`usage.prompt_tokens_details.cached_tokens` from it: a token-level model, not the
block-level one the proxy uses, so figures compared between the two are not circular.
Each model, and within it each `prompt_cache_key`, has a cache of its own (OpenAI routes
them apart); `expire` drops them all, and the `ledger` says per request what was re-billed
and why.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import orjson
import tiktoken

from tests.fakes.cache_ledger import Billed, Rendered, common, entry, render_elements

MIN_TOKENS = 1024
INCREMENT = 128
MAX_PROMPTS = 256


class PromptCache:
    """Remembers up to `MAX_PROMPTS` prompts per model, and keeps a `ledger` of what it
    re-billed and why (`tests.fakes.cache_ledger`); thread-safe (the fake serves from a
    thread)."""

    def __init__(self, min_tokens: int = MIN_TOKENS, increment: int = INCREMENT) -> None:
        self.min_tokens = min_tokens
        self.increment = increment
        self._seen: dict[str, list[list[int]]] = {}
        """By model and `prompt_cache_key`."""
        self._last: dict[str, tuple[str, Rendered]] = {}
        self.ledger: list[Billed] = []
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()
            self._last.clear()
            self.ledger.clear()

    def expire(self) -> None:
        """Drop every cached prompt, as a provider does after minutes without a hit."""
        with self._lock:
            self._seen.clear()

    def cached(
        self,
        body: dict[str, Any],
        enc: tiktoken.Encoding,
        prompt_tokens: int,
        session: str = "",
    ) -> int:
        """Cached tokens for this request (at most its prompt tokens); remembers it."""
        rendered = render_elements(
            elements(body.get("tools"), body["messages"], enc), tools_of(body)
        )
        model = str(body.get("model"))
        with self._lock:
            key = body.get("prompt_cache_key")
            seen = self._seen.setdefault(f"{model}\0{key if isinstance(key, str) else ''}", [])
            shared = max((common(rendered.tokens, s) for s in seen), default=0)
            seen.append(rendered.tokens)
            del seen[:-MAX_PROMPTS]
            cached = min(self._cacheable(shared), prompt_tokens)
            last = self._last.get(session)
            whole = self._cacheable(len(last[1].tokens)) if last is not None else 0
            self.ledger.append(entry(session, model, last, rendered, cached, whole))
            self._last[session] = (model, rendered)
        return cached

    def _cacheable(self, shared: int) -> int:
        if shared < self.min_tokens:
            return 0
        return self.min_tokens + (shared - self.min_tokens) // self.increment * self.increment


def tools_of(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and bool(tools)


def render(tools: object, messages: Sequence[Any], enc: tiktoken.Encoding) -> list[int]:
    return [t for element in elements(tools, messages, enc) for t in element]


def elements(tools: object, messages: Sequence[Any], enc: tiktoken.Encoding) -> list[list[int]]:
    """The tools (when any), then each message: each as its tokens."""
    out: list[list[int]] = []
    if isinstance(tools, list) and tools:
        out.append(enc.encode_ordinary(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode()))
    for msg in messages:
        tokens = enc.encode_ordinary(f"<|{msg.get('role')}|>")
        content = msg.get("content")
        text = content if isinstance(content, str) else orjson.dumps(content).decode()
        tokens += enc.encode_ordinary(text)
        if msg.get("tool_calls"):
            tokens += enc.encode_ordinary(orjson.dumps(msg["tool_calls"]).decode())
        out.append(tokens)
    return out
