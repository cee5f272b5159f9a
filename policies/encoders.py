"""Tokenizers for the counter: tiktoken, loaded without hanging, or an estimator.

tiktoken downloads its BPE files on first use, with no timeout, so `LoadJob` runs a
loader in a daemon thread that its caller may stop waiting for. `EstimatingEncoder`
stands in when no exact encoding can be had (`policies.cuts` cuts texts with either).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Protocol


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

    from policies import bpe_files

    bpe_files.ensure(name)  # offline, rs_bpe rebuilds the file tiktoken would download
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
