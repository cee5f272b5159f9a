"""Token counting with OpenAI's cookbook formula, a per-message cache and an offline fallback.

Agents resend their whole history every turn, so each message's count is cached under a
hash of its canonical bytes: a warm request tokenizes only what is new. When tiktoken
cannot load an encoding (no network, no `TIKTOKEN_CACHE_DIR`), counting falls back to an
estimator that errs on the high side; it says so once and never fails a request.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson

from policies.images import image_part_tokens
from policies.messages import Message
from policies.models import ModelTable

log = logging.getLogger("curator.tokens")

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
DEFAULT_ENCODING = "o200k_base"


class Encoder(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


class EstimatingEncoder:
    """Stands in for a BPE encoding that could not be loaded.

    One token per 3 UTF-8 bytes overestimates typical English (about 4) and code, so a
    budget computed with it is conservative. `decode` only has to invert `encode_ordinary`.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def encode_ordinary(self, text: str) -> list[int]:
        data = text.encode("utf-8", "surrogatepass")
        return [int.from_bytes(data[i : i + 3], "big") for i in range(0, len(data), 3)]

    def decode(self, tokens: list[int]) -> str:
        data = b"".join(t.to_bytes(3, "big").lstrip(b"\0") for t in tokens)
        return data.decode("utf-8", "ignore")


def _load_tiktoken(name: str) -> Encoder:
    import tiktoken

    enc: Encoder = tiktoken.get_encoding(name)
    return enc


class TokenCounter:
    """Counts tokens for chat requests. One instance per process; thread-safe."""

    def __init__(
        self,
        models: ModelTable | None = None,
        *,
        cache_entries: int = 200_000,
        loader: Callable[[str], Encoder] = _load_tiktoken,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self.models = models or ModelTable()
        self._cache_entries = cache_entries
        self._loader = loader
        self._on_fallback = on_fallback
        self._encoders: dict[str, Encoder] = {}
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self.fallbacks: set[str] = set()

    # -- encodings -------------------------------------------------------------------
    def encoding_name(self, model: str) -> str:
        info = self.models.find(model)
        if info is not None and info.encoding:
            return info.encoding
        try:
            import tiktoken

            return str(tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1]))
        except (KeyError, ImportError):
            return DEFAULT_ENCODING

    def encoder(self, model: str) -> Encoder:
        return self._encoder_named(self.encoding_name(model))

    def _encoder_named(self, name: str) -> Encoder:
        enc = self._encoders.get(name)
        if enc is not None:
            return enc
        with self._lock:
            enc = self._encoders.get(name)
            if enc is None:
                enc = self._load(name)
                self._encoders[name] = enc
        return enc

    def _load(self, name: str) -> Encoder:
        try:
            return self._loader(name)
        except Exception as exc:  # any failure to load must degrade, never fail a request
            log.warning(
                "tokenizer %s unavailable (%s); estimating token counts instead. "
                "Set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's BPE files.",
                name,
                type(exc).__name__,
            )
            self.fallbacks.add(name)
            if self._on_fallback is not None:
                self._on_fallback(name)
            return EstimatingEncoder(name)

    # -- counting --------------------------------------------------------------------
    def count_text(self, text: str, model: str) -> int:
        return len(self.encoder(model).encode_ordinary(text)) if text else 0

    def count_message(self, msg: Message, model: str) -> int:
        enc = self.encoder(model)
        key = _message_key(msg, enc.name)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        n = self._count_uncached(msg, enc)
        with self._lock:
            self._cache[key] = n
            if len(self._cache) > self._cache_entries:
                self._cache.popitem(last=False)
        return n

    def count_messages(self, messages: Sequence[Message], model: str) -> int:
        """Prompt tokens for these messages, reply priming included."""
        return sum(self.count_message(m, model) for m in messages) + REPLY_PRIMING

    def count_tools(self, tools: Sequence[Mapping[str, Any]], model: str) -> int:
        from policies.tooldefs import tool_definition_tokens

        return tool_definition_tokens(tools, self.encoder(model), model)

    def _count_uncached(self, msg: Message, enc: Encoder) -> int:
        n = TOKENS_PER_MESSAGE
        for key, value in msg.items():
            if key == "content":
                n += _content_tokens(value, enc)
            elif key == "tool_calls":
                n += _tool_calls_tokens(value, enc)
            elif key == "function_call" and isinstance(value, Mapping):
                n += _function_tokens(value, enc)
            elif isinstance(value, str):
                n += len(enc.encode_ordinary(value))
                if key == "name":
                    n += TOKENS_PER_NAME
        return n

    # -- shortening ------------------------------------------------------------------
    def head(self, text: str, model: str, max_tokens: int) -> str:
        """The longest prefix of `text` of at most `max_tokens` tokens."""
        return self._cut(text, model, max_tokens, from_end=False)

    def tail(self, text: str, model: str, max_tokens: int) -> str:
        """The longest suffix of `text` of at most `max_tokens` tokens."""
        return self._cut(text, model, max_tokens, from_end=True)

    def _cut(self, text: str, model: str, max_tokens: int, *, from_end: bool) -> str:
        if max_tokens <= 0 or not text:
            return ""
        enc = self.encoder(model)
        # Encode only a window a little larger than needed: a 30 KB tool output cut to
        # 2,000 tokens should not pay for tokenizing all 30 KB again.
        span = max_tokens * 8 + 16
        piece = text[-span:] if from_end else text[:span]
        tokens = enc.encode_ordinary(piece)
        if len(tokens) <= max_tokens and len(piece) == len(text):
            return text
        kept = tokens[-max_tokens:] if from_end else tokens[:max_tokens]
        out = enc.decode(kept)
        # A cut inside a multi-byte character decodes to U+FFFD; trim it off.
        return out.lstrip("\ufffd") if from_end else out.rstrip("\ufffd")


def _message_key(msg: Message, encoding: str) -> bytes:
    try:
        data = orjson.dumps(msg, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = repr(sorted(msg.items(), key=lambda kv: str(kv[0]))).encode()
    return hashlib.blake2b(data, digest_size=16, person=encoding.encode()[:16]).digest()


def _content_tokens(content: object, enc: Encoder) -> int:
    if isinstance(content, str):
        return len(enc.encode_ordinary(content))
    if not isinstance(content, list):
        return 0
    n = 0
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            n += len(enc.encode_ordinary(part["text"]))
        elif kind == "image_url":
            n += image_part_tokens(part.get("image_url"))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            n += len(enc.encode_ordinary(part["refusal"]))
        else:
            # input_audio, file and future part types: count their text-bearing fields.
            n += len(enc.encode_ordinary(orjson.dumps(part).decode()))
    return n


def _function_tokens(fn: Mapping[str, Any], enc: Encoder) -> int:
    n = 0
    for key in ("name", "arguments"):
        value = fn.get(key)
        if isinstance(value, str):
            n += len(enc.encode_ordinary(value))
    return n


def _tool_calls_tokens(calls: object, enc: Encoder) -> int:
    if not isinstance(calls, list):
        return 0
    return sum(
        _function_tokens(c["function"], enc)
        for c in calls
        if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)
    )
