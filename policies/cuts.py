"""Head and tail cuts: the longest start (or end) of a text that fits in a token budget.

Exact with any `Encoder`, and cheap on long texts: only a window a little longer than the
cut is encoded, and the cut is proven by re-encoding it (`fit`). `policies.splits.Profile`
is a faster `Source` of the same text; `fit` runs the same algorithm on either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from policies.encoders import Encoder, counter_of

_EDGE_TOKENS = 8
"""Tokens next to a window's cut edge may differ from the full text's; keep clear."""
_CONTINUATION = bytes(range(0x80, 0xC0))


class _Window(Protocol):
    @property
    def chars(self) -> int:
        """Characters in the window."""
        ...

    @property
    def tokens(self) -> int:
        """Tokens of the window, encoded on its own."""
        ...

    def more_than(self, n: int) -> bool:
        """`tokens > n`, which a window may know without counting all of its tokens."""
        ...


class HeadWindow(_Window, Protocol):
    """The tokens of a prefix of a text, as `fit` reads them."""

    def head_chars(self, k: int) -> int:
        """Whole characters of the window's first `k` tokens, decoded."""
        ...


class TailWindow(_Window, Protocol):
    """The tokens of a suffix of a text, as `fit` reads them."""

    def tail_chars(self, k: int) -> int:
        """Characters whose first byte is among the window's last `k` tokens, decoded."""
        ...


class Source(Protocol):
    """A text as `fit` measures it: token windows, and exact counts of its slices."""

    def head_window(self, span: int) -> HeadWindow: ...

    def tail_window(self, span: int) -> TailWindow: ...

    def count(self, start: int, stop: int) -> int:
        """Tokens of `text[start:stop]`, encoded on its own."""
        ...


class _Tokens:
    """A window encoded outright."""

    __slots__ = ("_enc", "_tokens", "chars")

    def __init__(self, enc: Encoder, piece: str) -> None:
        self._enc, self.chars, self._tokens = enc, len(piece), enc.encode_ordinary(piece)

    @property
    def tokens(self) -> int:
        return len(self._tokens)

    def more_than(self, n: int) -> bool:
        return len(self._tokens) > n

    def head_chars(self, k: int) -> int:
        return prefix_chars(self._enc.decode_bytes(self._tokens[:k]))

    def tail_chars(self, k: int) -> int:
        return lead_bytes(self._enc.decode_bytes(self._tokens[-k:]))


class _Plain:
    """A text that `fit` encodes window by window."""

    __slots__ = ("_enc", "_text")

    def __init__(self, enc: Encoder, text: str) -> None:
        self._enc, self._text = enc, text

    def head_window(self, span: int) -> HeadWindow:
        return _Tokens(self._enc, self._text[:span])

    def tail_window(self, span: int) -> TailWindow:
        text = self._text
        return _Tokens(self._enc, text if span >= len(text) else text[-span:])

    def count(self, start: int, stop: int) -> int:
        return counter_of(self._enc)(self._text[start:stop])


def fit_chars(enc: Encoder, text: str, max_tokens: int, *, from_end: bool) -> int:
    """How many characters from the start (or end) of `text` fit in `max_tokens` tokens.

    Only a window a little longer than needed is encoded, never the whole text: cutting
    a 30 KB tool output to 2,000 tokens should not pay for tokenizing all of it.
    """
    return fit(_Plain(enc, text), len(text), max_tokens, from_end=from_end)


def fit(source: Source, length: int, max_tokens: int, *, from_end: bool) -> int:
    """`fit_chars` on any `Source` of a text of `length` characters.

    One algorithm for every source, so a source that measures the same text faster
    (`policies.splits.Profile`) finds exactly the same cut.
    """
    if max_tokens <= 0 or not length:
        return 0
    if from_end:
        tail = _widen(source.tail_window, length, max_tokens)
        if tail is None:
            return length
        return _settle(
            tail.tail_chars, lambda chars: source.count(length - chars, length), max_tokens
        )
    head = _widen(source.head_window, length, max_tokens)
    if head is None:
        return length
    return _settle(head.head_chars, lambda chars: source.count(0, chars), max_tokens)


W = TypeVar("W", bound=_Window)


def _widen(open_window: Callable[[int], W], length: int, max_tokens: int) -> W | None:
    """A window holding more than `max_tokens` tokens to cut from; None if all of it fits."""
    span = max_tokens * 5 + 64  # code runs ~3.5 characters a token, prose ~4.5
    while True:
        window = open_window(span)
        whole = window.chars == length
        if whole and window.tokens <= max_tokens:
            return None
        if whole or window.more_than(max_tokens + _EDGE_TOKENS):
            return window
        # Extrapolate from this piece's density, growing by at least a quarter.
        need = window.chars * (max_tokens + 2 * _EDGE_TOKENS) // max(1, window.tokens)
        span = max(span + span // 4, need)


def _settle(chars_of: Callable[[int], int], count_of: Callable[[int], int], max_tokens: int) -> int:
    """Characters of the longest cut of at most `max_tokens`, trying the window's first
    (or last) k tokens for shrinking k."""
    k = max_tokens
    while k > 0:
        chars = chars_of(k)
        # Re-encoding the cut is the only proof: BPE of a prefix can differ from a prefix
        # of the BPE, and a multi-byte character may straddle the boundary.
        n = count_of(chars)
        if n <= max_tokens:
            return chars
        k -= n - max_tokens
    return 0


def lead_bytes(data: bytes) -> int:
    """Characters that start in UTF-8 `data` (continuation bytes are not counted)."""
    return len(data.translate(None, _CONTINUATION))


def prefix_chars(data: bytes) -> int:
    """Whole characters in UTF-8 bytes that may end inside a character."""
    chars = len(data.translate(None, _CONTINUATION))
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:
            need = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return chars - (need > back)
    return chars
