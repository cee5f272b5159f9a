"""A faster exact tokenizer for o200k_base and cl100k_base: rs_bpe, GitHub's `bpe` algorithm.

tiktoken is the reference. rs_bpe produces the same token ids (checked at load, below, and
against tiktoken on random and real texts by `tests/policies/test_fast_bpe.py`) and counts
about twice as fast (`python -m bench.tokens_bench`), which is most of what curating a
never-seen history costs. Its vocabularies are compiled in, so these encodings need no
download either.

`load_exact` hands out rs_bpe for the encodings it has when it is installed and passes the
load-time check, and tiktoken otherwise. `CURATOR_TOKENIZER=tiktoken` forces tiktoken.

rs_bpe keeps the GIL while it works (tiktoken lets it go), so one call on a long text stops
every other thread of the process, the event loop too: ~17-20 ms for a 480 KB tool output.
A text longer than `HOLD_CHARS` is therefore counted and encoded piece by piece, cut at
the encoding's split points (`policies.split_rules`), where its tokens are exactly those of the
pieces: between two pieces the loop gets the GIL back (the switch interval `curator serve`
sets), and off the event loop the piece's thread lets go of the GIL at once
(`_let_others_in`). A text with no split point for `LONGEST_CHARS` past `HOLD_CHARS` (one
25 MB line: 2-3 s in one call, every client stalled) is cut there anyway, before a blank
that follows a visible character when there is one, else at that character: a forced cut.
Counting there may differ from the whole text's count by a token or so, so `count` adds
`FORCED_CUT_TOKENS` per forced cut and errs high (~1 token in 16k characters); ids from
`encode_ordinary` still decode to the text exactly, so cuts made with them stay exact.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from policies.encoders import Encoder, load_tiktoken
from policies.split_rules import SPLITS

log = logging.getLogger("curator.tokens")

TOKENIZER_ENV = "CURATOR_TOKENIZER"
"""`auto` (the default): rs_bpe where it can; `tiktoken`: tiktoken always."""
TOKENIZER_CHOICES = ("auto", "tiktoken")

# Contractions, case, letters of several scripts, digits, emoji, whitespace runs, the
# newline rules `policies.splits` relies on, and a special token's text.
PROBE = (
    "Hello world's TEST isn't 'll 've I'M naïve café Straße Привет мир 日本語のテキスト "
    "한국어 مرحبا नमस्ते 😀👍🏽 x = 1234567 + 3.14159; // 1,000,000\ndef f(a, b):\n    return "
    "a/b  \n\n\t\r\n   \n/path/to/file.py\n}\n/\nCamelCaseHTTPServer a1b2c3 __init__ "
    "<|endoftext|> ...!!! \u00a0\u3000 end"
)
PROBE_DIGESTS = {
    "o200k_base": "7c4f13fcecfb7bb58b5ab948c15b8821",
    "cl100k_base": "9e92fec347fce8abb9ac3dca5f5a31b4",
}
"""`ids_digest` of tiktoken's encoding of PROBE, per encoding rs_bpe has."""


def ids_digest(ids: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:32]


HOLD_CHARS = 16_384
"""The longest text rs_bpe gets in one call when it can be cut (~0.5 ms of holding the GIL
for ASCII here); see the module docstring."""
LONGEST_CHARS = 2 * HOLD_CHARS
"""The longest piece: past it, a text with no split point is cut anyway (a forced cut).
rs_bpe holds the GIL ~9 ms for 32k characters of base64 here (16 ms at 64k, the bound
before: a 25 MB base64 prompt's ~380 pieces made as many ticks of the loop 10-20 ms late)."""
FORCED_CUT_TOKENS = 1
"""Added to a count per forced cut, so a count taken in pieces is never low."""
_BLANK = re.compile(r"(?<=\S)[ \t](?=\S)")
"""A forced cut's first choice: before a blank between two visible characters (a word's
leading space belongs to the word's piece in both encodings, so the cut is likely exact)."""


class FastBpeEncoder:
    """An rs_bpe tokenizer behind the `Encoder` protocol, with a `count` that builds no list."""

    __slots__ = ("_bpe", "_hold_chars", "_longest", "_split", "name", "tokenizer")

    def __init__(
        self,
        name: str,
        tokenizer: Any,
        split: re.Pattern[str] | None = None,
        hold_chars: int = HOLD_CHARS,
        longest_chars: int = LONGEST_CHARS,
    ) -> None:
        """`split`: the encoding's split rule (`policies.split_rules.SPLITS`); None: texts are
        cut only where forced. `longest_chars`: see `LONGEST_CHARS` (at least `hold_chars`)."""
        self.name = name
        self.tokenizer = tokenizer
        self._bpe = tokenizer.bpe()
        self._split = split
        self._hold_chars = hold_chars
        self._longest = max(hold_chars, longest_chars)

    def encode_ordinary(self, text: str) -> list[int]:
        if len(text) <= self._hold_chars:
            return self._encode(text)
        tokens: list[int] = []
        for piece, _ in self._pieces(text):
            tokens += self._encode(piece)
        return tokens

    def count(self, text: str) -> int:
        if len(text) <= self._hold_chars:
            return self._count(text)
        return sum(
            self._count(piece) + (FORCED_CUT_TOKENS if forced else 0)
            for piece, forced in self._pieces(text)
        )

    def _encode(self, text: str) -> list[int]:
        try:
            tokens: list[int] = self.tokenizer.encode(text)
        except UnicodeEncodeError:
            tokens = self.tokenizer.encode(_without_surrogates(text))
        return tokens

    def _count(self, text: str) -> int:
        try:
            n: int = self.tokenizer.count(text)
        except UnicodeEncodeError:
            n = self.tokenizer.count(_without_surrogates(text))
        return n

    def _pieces(self, text: str) -> Iterator[tuple[str, bool]]:
        """`text` cut at the first split point past every `hold_chars` characters, or forced
        (see the module docstring); each piece with whether its end was a forced cut."""
        hold, start, n = self._hold_chars, 0, len(text)
        while n - start > hold:
            stop, forced = self._cut(text, start + hold, min(n, start + self._longest))
            yield text[start:stop], forced
            _let_others_in()
            start = stop
        yield text[start:], False

    def _cut(self, text: str, least: int, most: int) -> tuple[int, bool]:
        """Where the piece that must not end before `least` ends: a split point up to `most`
        (searched no further, so a search holds the GIL no longer than a piece), else a
        forced cut."""
        found = self._split.search(text, least, most) if self._split is not None else None
        if found is not None:
            return found.end(), False
        if most == len(text):  # the rest is no longer than a piece may be: exact, whole
            return most, False
        blank = _BLANK.search(text, least, most)
        return (blank.start() if blank is not None else most), True

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        data: bytes = self._bpe.decode_tokens(list(tokens))
        return data


def _let_others_in() -> None:
    """Between two pieces, off the event loop: let go of the GIL for a moment, so a loop
    waiting for it runs now (`proxy.priority.let_the_loop_in`), not a switch interval into
    the next piece. On the loop itself that would only let a background thread in."""
    if asyncio._get_running_loop() is None:
        time.sleep(0)


def _without_surrogates(text: str) -> str:
    # What tiktoken encodes in place of a str UTF-8 cannot hold: each lone surrogate
    # becomes U+FFFD.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def tokenizer_choice() -> str:
    """`CURATOR_TOKENIZER`, checked: a typo must not silently change what counts."""
    value = os.environ.get(TOKENIZER_ENV, "").strip().lower() or "auto"
    if value not in TOKENIZER_CHOICES:
        raise ValueError(
            f"{TOKENIZER_ENV}={value!r}: must be one of {', '.join(TOKENIZER_CHOICES)}"
        )
    return value


def load_fast(name: str) -> FastBpeEncoder | None:
    """rs_bpe's tokenizer for `name`, or None: not one it has, not installed, or it
    disagreed with tiktoken on the probe text."""
    expected = PROBE_DIGESTS.get(name)
    if expected is None or tokenizer_choice() == "tiktoken":
        return None
    try:
        module = importlib.import_module("rs_bpe.bpe")
    except ImportError:
        return None
    enc = FastBpeEncoder(name, getattr(module.openai, name)(), SPLITS.get(name))
    if ids_digest(enc.encode_ordinary(PROBE)) != expected:
        log.warning("rs_bpe's %s disagrees with tiktoken on a probe text; using tiktoken", name)
        return None
    return enc


def load_exact(name: str) -> Encoder:
    """The encoding `name`: rs_bpe's when `load_fast` gives one, else tiktoken's."""
    fast = load_fast(name)
    return fast if fast is not None else load_tiktoken(name)
