"""Builders for chat messages and curation contexts, so tests read like conversations."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from policies.base import CurationContext, PinSpec
from policies.encoders import Encoder
from policies.messages import Message, units
from policies.tokens import TokenCounter
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols import PROTOCOLS
from proxy.protocols.chat import CHAT

Msg = dict[str, Any]
OnOverflow = Literal["truncate", "reject", "forward"]


@functools.lru_cache(maxsize=1)
def counter() -> TokenCounter:
    """One counter per test process: loading a BPE encoding takes a while."""
    return TokenCounter()


def ctx(
    budget: int = 100_000,
    model: str = "gpt-4o",
    pins: PinSpec | None = None,
    on_overflow: OnOverflow = "truncate",
) -> CurationContext:
    return CurationContext(
        model=model,
        counter=counter(),
        budget=budget,
        pins=pins if pins is not None else PinSpec(),
        on_overflow=on_overflow,
    )


def tokens(messages: list[Msg] | list[Mapping[str, Any]], model: str = "gpt-4o") -> int:
    """Prompt tokens of a message list, reply priming included."""
    return counter().count_messages(messages, model)


def text_tokens(text: str, model: str = "gpt-4o") -> int:
    return counter().count_text(text, model)


def long_text(n_words: int, word: str = "lorem") -> str:
    """Deterministic filler text whose numbered words keep every slice distinct."""
    return " ".join(f"{word}{i}" for i in range(n_words))


def system(content: str = "You are a helpful assistant.") -> Msg:
    return {"role": "system", "content": content}


def developer(content: str = "Answer tersely.") -> Msg:
    return {"role": "developer", "content": content}


def user(content: str | list[Msg] = "Hello!", name: str | None = None) -> Msg:
    msg: Msg = {"role": "user", "content": content}
    if name is not None:
        msg["name"] = name
    return msg


def assistant(content: str | None = "Sure.") -> Msg:
    return {"role": "assistant", "content": content}


def call(id: str, name: str = "search", args: Mapping[str, Any] | None = None) -> Msg:
    arguments = json.dumps(dict(args) if args is not None else {"q": id})
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls: Msg | str, content: str | None = None) -> Msg:
    """An assistant message making tool calls; a bare string is a call id to `search`."""
    built = [call(c) if isinstance(c, str) else c for c in calls]
    return {"role": "assistant", "content": content, "tool_calls": built}


def tool_result(id: str, content: str | list[Msg] = "result") -> Msg:
    return {"role": "tool", "tool_call_id": id, "content": content}


def function_call(
    name: str = "lookup", args: Mapping[str, Any] | None = None, content: str | None = None
) -> Msg:
    arguments = json.dumps(dict(args) if args is not None else {})
    return {
        "role": "assistant",
        "content": content,
        "function_call": {"name": name, "arguments": arguments},
    }


def function_result(name: str = "lookup", content: str = "42") -> Msg:
    return {"role": "function", "name": name, "content": content}


def text_part(text: str = "What is in this picture?") -> Msg:
    return {"type": "text", "text": text}


def image_part(url: str = "https://example.com/cat.png", detail: str = "low") -> Msg:
    return {"type": "image_url", "image_url": {"url": url, "detail": detail}}


def tool_use(id: str, output: str | list[Msg], name: str = "read_file") -> list[Msg]:
    """One assistant message calling `name`, and its result."""
    return [assistant_calls(call(id, name)), tool_result(id, output)]


def log_read(lines: int = 400) -> list[Msg]:
    """An agent's start: system prompt, a request, and a `read_file` of a `lines`-line log
    (long enough for truncation to cut)."""
    return [
        system("You are a coding agent."),
        user("Read the log."),
        *tool_use("c1", long_text(lines, "line")),
    ]


class CharEncoder:
    """One token per character, so expected counts are plain arithmetic. Records its work."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.encoded: list[str] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.encoded.append(text)
        return [ord(c) for c in text]

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return "".join(map(chr, tokens)).encode("utf-8", "surrogatepass")


def failing_loader(name: str) -> Encoder:
    """A tiktoken loader that fails as it does offline."""
    raise OSError(f"no route to openaipublic.blob.core.windows.net for {name}")


def floor_tokens(messages: Sequence[Message], ctx: CurationContext) -> int:
    """Tokens of what no curator may drop: units holding a pin, and the last unit."""
    pinned = ctx.pinned(messages)
    found = units(messages)
    keep = [
        messages[i]
        for k, unit in enumerate(found)
        if k == len(found) - 1 or not pinned.isdisjoint(unit.indexes())
        for i in unit.indexes()
    ]
    return tokens(list(keep))


AUDIT_MODES: Mapping[str, dict[str, Any]] = {
    "curated": {"mode": "enforce"},
    "skipped": {"mode": "enforce"},
    "shadow": {"mode": "shadow"},
    "summary": {"subcall": "summary"},
    "rescued": {"subcall": "rescued"},
}


def audited(id: str = "r", time: float = 0.0, **fields: Any) -> ExchangeRecord:
    """The `ExchangeRecord` the audit log reads, given in the log's own terms: `time`,
    `kind` (`chat`, `responses` or `summarizer`), `mode` as the log says it, `latency_ms`,
    `ttfb_ms`, `body` (the budget facts); other fields keep their names."""
    kind = fields.pop("kind", "chat")
    protocol = fields.pop("protocol", None) or next((p for p in PROTOCOLS if p.name == kind), CHAT)
    extra: dict[str, Any] = {"subcall": "summary"} if kind == "summarizer" else {}
    mode = fields.pop("mode", None)
    if mode is not None:
        extra |= AUDIT_MODES[mode]
    if "latency_ms" in fields:
        extra["latency_s"] = fields.pop("latency_ms") / 1000
    if "ttfb_ms" in fields:
        ttfb = fields.pop("ttfb_ms")
        extra["ttfb_s"] = ttfb / 1000 if ttfb is not None else None
    if "body" in fields:
        extra["facts"] = fields.pop("body")
    return ExchangeRecord(id, time, "POST", protocol.path, protocol=protocol, **(fields | extra))
