"""Tokenizers for the counter: tiktoken, loaded without hanging, or an estimator.

tiktoken downloads its BPE files on first use, with no timeout, so `LoadJob` runs a
loader in a daemon thread that its caller may stop waiting for. `EstimatingEncoder`
stands in when no exact encoding can be had. `fit_chars` finds exact head/tail cuts
with either.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Protocol, TypeVar


class Encoder(Protocol):
    """What the counter needs from a tokenizer; tiktoken's `Encoding` has it."""

    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


Loader = Callable[[str], Encoder]


def counter_of(enc: Encoder) -> Callable[[str], int]:
    """`enc`'s token counter for a text: its `count` where it has one, else len(encode)."""
    count: Callable[[str], int] | None = getattr(enc, "count", None)
    if count is not None:
        return count
    encode = enc.encode_ordinary
    return lambda text: len(encode(text))


def load_tiktoken(name: str) -> Encoder:
    import tiktoken

    enc: Encoder = tiktoken.get_encoding(name)
    return enc


class LoadJob:
    """Runs a loader in a daemon thread, so the caller can stop waiting for it.

    A load that finishes after its caller gave up is handed to `late`, so a slow first
    download still ends the estimating.
    """

    def __init__(self, name: str, loader: Loader, late: Callable[[str, Encoder], None]) -> None:
        self._name, self._loader, self._late = name, loader, late
        self._lock = threading.Lock()
        self._result: Encoder | Exception | None = None
        self._abandoned = False
        self._done = threading.Event()
        threading.Thread(target=self._run, name=f"curator-load-{name}", daemon=True).start()

    def _run(self) -> None:
        try:
            result: Encoder | Exception = self._loader(self._name)
        except Exception as exc:  # handed to the waiter, which degrades to estimates
            result = exc
        with self._lock:
            self._result, late = result, self._abandoned
        self._done.set()
        if late and not isinstance(result, Exception):
            self._late(self._name, result)

    def wait(self, timeout: float) -> Encoder | Exception | None:
        """The encoder, the loader's exception, or None if it is still running."""
        self._done.wait(timeout)
        with self._lock:
            self._abandoned = self._result is None
            return self._result


# Pieces much as a BPE pre-tokenizer cuts them; each is charged one token per N bytes.
# The sizes were fitted against o200k_base and cl100k_base so that no realistic text is
# counted low: letters run about 4 bytes a token in real words, punctuation about 2.
_PIECES = re.compile(
    r"(?P<word> ?[A-Z]?[a-z]+)|(?P<caps> ?[A-Z]+)|(?P<digits>[0-9]{1,3})"
    r"|(?P<space>[ \t\r\n\f\v]+)|(?P<rule>(?P<rc>[!-/:-@\[-`{-~])(?P=rc){3,})"
    r"|(?P<punct> ?[!-/:-@\[-`{-~]+)|(?P<wide>[\x80-\uffff]+)|(?P<astral>[^\x00-\uffff]+)"
    r"|(?P<other>[\x00-\x1f\x7f])"
)
_BYTES_PER_TOKEN = MappingProxyType(
    {"word": 4, "caps": 2, "digits": 3, "space": 16, "rule": 16, "rc": 16, "punct": 2,
     "wide": 2, "astral": 1, "other": 1}
)  # fmt: skip
_WORD_BYTES = 12
_LEN_SHIFT = 128
_LOW = (1 << _LEN_SHIFT) - 1


class EstimatingEncoder:
    """Stands in for a BPE encoding that could not be loaded; errs on the high side.

    Against o200k_base and cl100k_base it counts about 1.5x the real tokens of code and
    logs and 1.7x of English prose; the worst cases measured (random letters, random
    non-ASCII characters, Armenian in cl100k) still get 0.55x or more. Each token
    carries its bytes, so `decode_bytes` inverts `encode_ordinary` exactly, for any str
    (lone surrogates and NULs included).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def encode_ordinary(self, text: str) -> list[int]:
        tokens: list[int] = []
        for m in _PIECES.finditer(text):
            data = m.group().encode("utf-8", "surrogatepass")
            size = _BYTES_PER_TOKEN[m.lastgroup or "other"]
            if len(data) <= size:  # most pieces: one token, taken without a loop
                tokens.append(len(data) << _LEN_SHIFT | int.from_bytes(data, "big"))
                continue
            if m.lastgroup == "word" and len(data) > _WORD_BYTES:
                # A letter run longer than a word is likely an id or a hash: charge densely.
                _chunk(tokens, data[:_WORD_BYTES], size)
                data, size = data[_WORD_BYTES:], 2
            _chunk(tokens, data, size)
        return tokens

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return b"".join((t & _LOW).to_bytes(t >> _LEN_SHIFT, "big") for t in tokens)


def _chunk(out: list[int], data: bytes, size: int) -> None:
    for i in range(0, len(data), size):
        piece = data[i : i + size]
        out.append(len(piece) << _LEN_SHIFT | int.from_bytes(piece, "big"))


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
