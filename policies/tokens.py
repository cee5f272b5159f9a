"""Token counting: OpenAI's cookbook formula, a bounded cache, an offline fallback.

Agents resend their whole history every turn, so each message's count is cached under
a digest of its canonical bytes (orjson with sorted keys, then SHA-256: the fastest
sound choice in bench/tokens_bench.py). Long texts, head/tail cuts and tool lists are
cached the same way, because curators ask for them again on every request.

tiktoken downloads BPE files on first use. Loading runs in a helper thread with a time
limit, so no request waits on a network that is not there. Without an exact encoding,
counting falls back to `EstimatingEncoder`, says so once in the log, calls
`on_fallback`, and carries on; a late load replaces the estimate.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from policies.encoders import Encoder, EstimatingEncoder, Loader, LoadJob, fit_chars, load_tiktoken
from policies.images import audio_part_tokens, image_part_tokens, opaque_part_tokens
from policies.messages import Message
from policies.models import ModelTable, bare_name
from policies.tooldefs import constants_for, tool_definition_tokens

log = logging.getLogger("curator.tokens")

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
DEFAULT_ENCODING = "o200k_base"
DEFAULT_CACHE_ENTRIES = 100_000
"""About 20 MB; one 110-message agent history needs ~150 entries."""
LOAD_TIMEOUT_S = 10.0
CACHE_MIN_CHARS = 256
"""Shorter texts encode in a few microseconds: not worth a cache entry."""
_MODEL_MEMO = 1_024


class _Lru:
    """A bounded, thread-safe map of digests to ints; the least recently used go first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Iterable[bytes]) -> list[int | None]:
        out: list[int | None] = []
        with self._lock:
            data = self._data
            for key in keys:
                value = data.get(key)
                if value is not None:
                    data.move_to_end(key)
                out.append(value)
        return out

    def put_many(self, items: Iterable[tuple[bytes, int]]) -> None:
        with self._lock:
            data = self._data
            data.update(items)
            while len(data) > self._capacity:
                data.popitem(last=False)


class TokenCounter:
    """Counts prompt tokens for chat requests. Share one per process: it is thread-safe."""

    def __init__(
        self,
        models: ModelTable | None = None,
        *,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        loader: Loader = load_tiktoken,
        on_fallback: Callable[[str], None] | None = None,
        load_timeout_s: float = LOAD_TIMEOUT_S,
    ) -> None:
        if cache_entries < 0:
            raise ValueError(f"cache_entries: must be >= 0, got {cache_entries}")
        if load_timeout_s <= 0:
            raise ValueError(f"load_timeout_s: must be > 0, got {load_timeout_s}")
        self.models = models or ModelTable()
        self._loader = loader
        self._on_fallback = on_fallback
        self._load_timeout_s = load_timeout_s
        self._cache = _Lru(cache_entries)
        self._encoders: dict[str, Encoder] = {}
        self._encoding_of: dict[str, str] = {}
        self._load_lock = threading.Lock()
        self.fallbacks: set[str] = set()
        """Encodings currently estimated because they could not be loaded."""

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    # -- encodings -------------------------------------------------------------------
    def encoding_name(self, model: str) -> str:
        """The `models:` section's encoding, else tiktoken's map, else o200k_base."""
        name = self._encoding_of.get(model)
        if name is None:
            name = self._resolve(model)
            if len(self._encoding_of) >= _MODEL_MEMO:
                self._encoding_of.clear()  # clients pick model names: keep the memo bounded
            self._encoding_of[model] = name
        return name

    def _resolve(self, model: str) -> str:
        info = self.models.find(model)
        if info is not None and info.encoding:
            return info.encoding
        try:
            import tiktoken

            return str(tiktoken.encoding_name_for_model(bare_name(model)))
        except (ImportError, KeyError):
            return DEFAULT_ENCODING

    def encoder(self, model: str) -> Encoder:
        name = self.encoding_name(model)
        enc = self._encoders.get(name)
        if enc is None:
            with self._load_lock:
                enc = self._encoders.get(name)
                if enc is None:
                    enc = self._encoders[name] = self._load(name)
        return enc

    def preload(self, *models: str) -> None:
        """Load the encodings these models use now (at startup), not on a first request."""
        for model in models:
            self.encoder(model)

    def _load(self, name: str) -> Encoder:
        result = LoadJob(name, self._loader, self._adopt).wait(self._load_timeout_s)
        if result is not None and not isinstance(result, Exception):
            return result
        why = "timed out" if result is None else f"{type(result).__name__}: {result}"
        log.warning(
            "tokenizer %s unavailable (%s); estimating token counts on the high side. "
            "Set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's BPE files.",
            name,
            why,
        )
        self.fallbacks.add(name)
        if self._on_fallback is not None:
            try:
                self._on_fallback(name)
            except Exception:  # a broken metrics hook must not fail the request
                log.exception("on_fallback hook failed")
        return EstimatingEncoder(name)

    def _adopt(self, name: str, enc: Encoder) -> None:
        with self._load_lock:
            self._encoders[name] = enc
            self.fallbacks.discard(name)
        log.info("tokenizer %s loaded late; counting exactly from now on", name)

    # -- counting --------------------------------------------------------------------
    def count_each(self, messages: Sequence[Message], model: str) -> list[int]:
        """Tokens of each message, its formula overhead included (reply priming not)."""
        enc = self.encoder(model)
        prefix = _prefix(b"m", enc)
        keys = [_digest(prefix, _json_bytes(m)) for m in messages]
        out: list[int] = []
        fresh: dict[bytes, int] = {}
        for msg, key, hit in zip(messages, keys, self._cache.get_many(keys), strict=True):
            if hit is None:
                hit = fresh.get(key)
                if hit is None:
                    hit = fresh[key] = _message_tokens(msg, enc)
            out.append(hit)
        if fresh:
            self._cache.put_many(fresh.items())
        return out

    def count_message(self, msg: Message, model: str) -> int:
        return self.count_each((msg,), model)[0]

    def count_messages(self, messages: Sequence[Message], model: str) -> int:
        """Prompt tokens for these messages, reply priming included."""
        return sum(self.count_each(messages, model)) + REPLY_PRIMING

    def count_text(self, text: str, model: str) -> int:
        if not text:
            return 0
        enc = self.encoder(model)
        if len(text) < CACHE_MIN_CHARS:
            return len(enc.encode_ordinary(text))
        key = _digest(_prefix(b"t", enc), _str_bytes(text))
        return self._cached(key, lambda: len(enc.encode_ordinary(text)))

    def count_tools(self, tools: Sequence[Mapping[str, Any]], model: str) -> int:
        """Tokens of a request's tool definitions (0 for none)."""
        if not tools:
            return 0
        enc = self.encoder(model)
        key = _digest(_prefix(b"T", enc), _json_bytes(list(tools)))
        k = constants_for(enc.name)
        return self._cached(key, lambda: tool_definition_tokens(tools, lambda s: _count(enc, s), k))

    def _cached(self, key: bytes, compute: Callable[[], int]) -> int:
        hit = self._cache.get_many((key,))[0]
        if hit is None:
            hit = compute()
            self._cache.put_many(((key, hit),))
        return hit

    # -- shortening ------------------------------------------------------------------
    def head(self, text: str, model: str, max_tokens: int) -> str:
        """The longest prefix of `text` that counts at most `max_tokens` tokens."""
        return text[: self._fit(text, model, max_tokens, from_end=False)]

    def tail(self, text: str, model: str, max_tokens: int) -> str:
        """The longest suffix of `text` that counts at most `max_tokens` tokens."""
        return text[len(text) - self._fit(text, model, max_tokens, from_end=True) :]

    def _fit(self, text: str, model: str, max_tokens: int, *, from_end: bool) -> int:
        if max_tokens <= 0:
            return 0
        if len(text) * 4 <= max_tokens:  # a token spans >= 1 byte, a character <= 4
            return len(text)
        enc = self.encoder(model)
        if len(text) < CACHE_MIN_CHARS:
            return fit_chars(enc, text, max_tokens, from_end=from_end)
        side = b"<" if from_end else b">"
        key = _digest(_prefix(side + str(max_tokens).encode(), enc), _str_bytes(text))
        return self._cached(key, lambda: fit_chars(enc, text, max_tokens, from_end=from_end))


def _prefix(kind: bytes, enc: Encoder) -> bytes:
    # Estimated and exact counts of one encoding must never share cache entries.
    tag = ("~" if isinstance(enc, EstimatingEncoder) else "") + enc.name
    return kind + b"\0" + tag.encode() + b"\0"


def _digest(prefix: bytes, data: bytes) -> bytes:
    # Python's 64-bit hash of the fields measured twice as fast, but a collision would
    # silently give one message another's count; both are far inside the 2 ms budget.
    h = hashlib.sha256(prefix)
    h.update(data)
    return h.digest()[:16]


def _json_bytes(value: object) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        # Not plain JSON (a library caller's objects, lone surrogates): repr is stable too.
        return repr(value).encode("utf-8", "surrogatepass")


def _str_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _count(enc: Encoder, text: str) -> int:
    return len(enc.encode_ordinary(text)) if text else 0


def _message_tokens(msg: Message, enc: Encoder) -> int:
    if not isinstance(msg, Mapping):
        return TOKENS_PER_MESSAGE
    n = TOKENS_PER_MESSAGE
    for key, value in msg.items():
        if key == "content":
            n += _content_tokens(value, enc)
        elif key == "tool_calls":
            if isinstance(value, list):
                n += sum(_call_tokens(c, enc) for c in value if isinstance(c, Mapping))
        elif key == "function_call":
            n += _function_tokens(value, enc)
        elif isinstance(value, str):
            n += _count(enc, value) + (TOKENS_PER_NAME if key == "name" else 0)
    return n


def _call_tokens(call: Mapping[str, Any], enc: Encoder) -> int:
    fn = call.get("function")
    return _function_tokens(fn if isinstance(fn, Mapping) else call.get("custom"), enc)


def _function_tokens(fn: object, enc: Encoder) -> int:
    """A call's name and arguments (`input` for custom tools)."""
    if not isinstance(fn, Mapping):
        return 0
    fields = (fn.get(k) for k in ("name", "arguments", "input"))
    return sum(_count(enc, v) for v in fields if isinstance(v, str))


def _content_tokens(content: object, enc: Encoder) -> int:
    if isinstance(content, str):
        return _count(enc, content)
    if not isinstance(content, list):
        return 0
    n = 0
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "refusal"):
            value = part.get(kind)
            n += _count(enc, value) if isinstance(value, str) else 0
        elif kind == "image_url":
            n += image_part_tokens(part.get("image_url"))
        elif kind == "input_audio":
            n += audio_part_tokens(part.get("input_audio"))
        else:
            n += opaque_part_tokens(part, lambda s: _count(enc, s))
    return n
