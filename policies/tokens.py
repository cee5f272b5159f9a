"""Token counting: OpenAI's rules (`policies.formula`, `policies.tooldefs`), a bounded
cache, an offline fallback.

Agents resend their whole history every turn, so each message's count is cached under
a digest of its canonical bytes (`policies.digests`: SHA-256, the fastest sound choice
in bench/tokens_bench.py). Long texts, head/tail cuts and tool lists are
cached the same way, because curators ask for them again on every request.

Encodings come from `policies.fast_bpe.load_exact`: rs_bpe for o200k_base and cl100k_base
(exact, about twice as fast, compiled in), tiktoken for the rest and as the fallback.
tiktoken downloads BPE files on first use. Loading runs in a helper thread with a time
limit, so no request waits on a network that is not there. Without an exact encoding,
counting falls back to `EstimatingEncoder`, says so once in the log, calls
`on_fallback`, and carries on; a late load replaces the estimate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.cuts import fit, fit_chars
from policies.digests import (
    ByIdentity,
    Lru,
    digest,
    json_bytes,
    message_key,
    namespace,
    str_bytes,
)
from policies.encoders import Encoder, EstimatingEncoder, Loader, LoadJob
from policies.fast_bpe import load_exact
from policies.formula import TOKENS_PER_MESSAGE, TOKENS_PER_NAME, Sink, count, message_tokens
from policies.images import pricing_for
from policies.messages import Message
from policies.models import ModelTable, bare_name
from policies.splits import Profile
from policies.tooldefs import tool_definition_tokens

log = logging.getLogger("curator.tokens")

__all__ = ["REPLY_PRIMING", "TOKENS_PER_MESSAGE", "TOKENS_PER_NAME", "TokenCounter"]

REPLY_PRIMING = 3
DEFAULT_ENCODING = "o200k_base"
DEFAULT_CACHE_ENTRIES = 100_000
"""About 20 MB; one 110-message agent history needs ~150 entries."""
LOAD_TIMEOUT_S = 10.0
CACHE_MIN_CHARS = 256
"""Shorter texts encode in a few microseconds: not worth a cache entry."""
PLAN_SHARE = 8
"""The plan and text caches (what curators computed from a message) hold 1/8 of the
entries each."""
_MODEL_MEMO = 1_024
Plan = tuple[int, ...]


class TokenCounter:
    """Counts prompt tokens for chat requests. Share one per process: it is thread-safe."""

    def __init__(
        self,
        models: ModelTable | None = None,
        *,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        loader: Loader = load_exact,
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
        self._cache = Lru[int](cache_entries)
        self._plans = Lru[Plan](cache_entries // PLAN_SHARE)
        self._texts = Lru[str](cache_entries // PLAN_SHARE)
        self._tool_keys = ByIdentity[bytes]()  # a shared tools list is hashed once
        self._encoders: dict[str, Encoder] = {}
        self._encoding_of: dict[str, str] = {}
        self._openai_of: dict[str, bool] = {}
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
        return self.measure(messages, model)[1]

    def measure(
        self,
        messages: Sequence[Message],
        model: str,
        sink: Sink | None = None,
        known: Sequence[bytes | None] = (),
    ) -> tuple[list[bytes], list[int]]:
        """Each message's cache key and tokens. Messages that had to be counted leave in
        `sink` what counting them found out (see `formula.Sink`). `known`, when given one
        per message, are the keys an earlier `measure` of them for `model` returned."""
        enc = self.encoder(model)
        images = pricing_for(model)
        # Models that count images differently must not share a message's count.
        space = namespace(b"m" if images == "tiles" else b"mp", enc)
        if len(known) == len(messages):
            keys = [k or message_key(space, m) for m, k in zip(messages, known, strict=True)]
        else:
            keys = [message_key(space, m) for m in messages]
        out: list[int] = []
        fresh: dict[bytes, int] = {}
        for msg, key, hit in zip(messages, keys, self._cache.get_many(keys), strict=True):
            if hit is None:
                hit = fresh.get(key)
                if hit is None:
                    hit = fresh[key] = message_tokens(msg, enc, sink, images)
            out.append(hit)
        if fresh:
            self._cache.put_many(fresh.items())
        return keys, out

    def direct(self, msg: Message, model: str) -> int:
        """The message's tokens, computed without the cache: for small messages only."""
        return message_tokens(msg, self.encoder(model), None, pricing_for(model))

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
            return count(enc, text)
        key = digest(namespace(b"t", enc), str_bytes(text))
        return self._cache.get_or_compute(key, lambda: count(enc, text))

    def count_tools(self, tools: Sequence[Mapping[str, Any]], model: str) -> int:
        """Tokens of a request's tool definitions (0 for none), rendered as OpenAI renders
        them (`policies.tool_render`); counted once per distinct list."""
        if not tools:
            return 0
        enc = self.encoder(model)
        openai = self.follows_openai(model)
        tag = namespace(b"T" if openai else b"TJ", enc)
        key = self._tool_keys.get_or_compute(
            tools, tag, lambda: digest(tag, json_bytes(list(tools)))
        )
        return self._cache.get_or_compute(
            key, lambda: tool_definition_tokens(tools, lambda s: count(enc, s), openai=openai)
        )

    def follows_openai(self, model: str) -> bool:
        """Whether OpenAI's prompt rendering applies to this model: tiktoken knows its name
        (or it is gpt-oss, whose renderer OpenAI published)."""
        known = self._openai_of.get(model)
        if known is None:
            known = _openai_name(bare_name(model))
            if len(self._openai_of) >= _MODEL_MEMO:
                self._openai_of.clear()
            self._openai_of[model] = known
        return known

    def remember(self, key: bytes, compute: Callable[[], Plan]) -> Plan:
        """A curator's plan for a message, cached under `key` (which must name the message's
        `key` and every parameter the plan depends on)."""
        return self._plans.get_or_compute(key, compute)

    def remember_text(self, key: bytes, compute: Callable[[], str]) -> str:
        """`remember`, for a short text a curator made from a message."""
        return self._texts.get_or_compute(key, compute)

    # -- shortening ------------------------------------------------------------------
    def head(self, text: str, model: str, max_tokens: int) -> str:
        """The longest prefix of `text` that counts at most `max_tokens` tokens."""
        return text[: self.fit(text, model, max_tokens, from_end=False)]

    def tail(self, text: str, model: str, max_tokens: int) -> str:
        """The longest suffix of `text` that counts at most `max_tokens` tokens."""
        return text[len(text) - self.fit(text, model, max_tokens, from_end=True) :]

    def fit(
        self,
        text: str,
        model: str,
        max_tokens: int,
        *,
        from_end: bool,
        profile: Profile | None = None,
    ) -> int:
        """Characters of `head` (or `tail`). A `profile` of `text` under this model's
        encoder gives the same answer, re-encoding only near the cut."""
        if max_tokens <= 0:
            return 0
        if len(text) * 4 <= max_tokens:  # a token spans >= 1 byte, a character <= 4
            return len(text)
        enc = self.encoder(model)
        if len(text) < CACHE_MIN_CHARS:
            return fit_chars(enc, text, max_tokens, from_end=from_end)
        if profile is not None and profile.enc is enc and profile.text is text:
            return fit(profile, len(text), max_tokens, from_end=from_end)
        side = b"<" if from_end else b">"
        key = digest(namespace(side + str(max_tokens).encode(), enc), str_bytes(text))
        return self._cache.get_or_compute(
            key, lambda: fit_chars(enc, text, max_tokens, from_end=from_end)
        )


def _openai_name(name: str) -> bool:
    if name.startswith("gpt-oss"):
        return True
    try:
        import tiktoken

        tiktoken.encoding_name_for_model(name)
    except (ImportError, KeyError):
        return False
    return True
