"""A long text's token count taken piece by piece, exactly, at its encoding's split points
(`policies.split_rules`).

A `Profile` counts a long text chunk by chunk, the chunks ending at split points about
`CHUNK_CHARS` apart: the same count for about the cost of one encode. Cutting that text
later (a head and a tail, each checked by re-encoding) then re-encodes only a chunk or two
near each edge, not windows of thousands of tokens. The answers are those of the plain
path, because `cuts.fit` runs the same algorithm on either.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from policies.cuts import lead_bytes, prefix_chars
from policies.encoders import Encoder, counter_of
from policies.fast_bpe import FastBpeEncoder
from policies.split_rules import SPLITS

CHUNK_CHARS = 512
"""A cut re-encodes about this much text per edge; smaller chunks mean more encode calls."""
PROFILE_MIN_CHARS = 2_048
"""Shorter texts are rarely cut, and cheap to re-encode when they are."""


def splits(enc: Encoder) -> re.Pattern[str] | None:
    """The split rule of `enc` when it is tiktoken's own encoding of that name, or rs_bpe's
    twin of it (never an estimator, nor an encoding someone built under a checked name)."""
    found = SPLITS.get(enc.name)
    if found is None:
        return None
    if isinstance(enc, FastBpeEncoder):
        return found  # it passed the probe check against tiktoken when it was loaded
    try:
        from tiktoken import registry
    except ImportError:
        return None
    return found if registry.ENCODINGS.get(enc.name) is enc else None


SEARCH_CHARS = 65_536
"""How far one search for a split point looks: a text with none for megabytes (one long
line) is searched window by window, so no search holds the GIL for long."""


def _next_split(rule: re.Pattern[str], text: str, pos: int) -> int:
    """The end of the first split point at or past `pos`, or len(text)."""
    n = len(text)
    while pos < n:
        found = rule.search(text, pos, min(n, pos + SEARCH_CHARS))
        if found is not None:
            return found.end()
        pos += SEARCH_CHARS - 64  # a split point's lookahead may cross a window's end
    return n


def _utf8_size(text: str) -> int:
    """len(text.encode()), a window at a time: encoding a long line at once holds the GIL."""
    return sum(
        len(text[i : i + SEARCH_CHARS].encode("utf-8", "surrogatepass"))
        for i in range(0, len(text), SEARCH_CHARS)
    )


class Profile:
    """A text's token count, with the count at each of its chunks' split points."""

    __slots__ = ("_counted", "_cum", "_marks", "enc", "size", "text")

    def __init__(self, enc: Encoder, text: str, rule: re.Pattern[str]) -> None:
        """Counts `text` chunk by chunk, at split points of `rule` (`splits(enc)`)."""
        self.enc, self.text = enc, text
        marks, cum = [0], [0]
        count, n = counter_of(enc), len(text)
        is_ascii = text.isascii()
        start = total = size = 0
        while start < n:
            stop = _next_split(rule, text, start + CHUNK_CHARS)
            chunk = text[start:stop]
            total += count(chunk)
            if not is_ascii:  # encoding left the chunk's UTF-8 with it: its size comes cheap
                size += _utf8_size(chunk)
            marks.append(stop)
            cum.append(total)
            start = stop
        self.size = n if is_ascii else size
        """The text's UTF-8 size in bytes."""
        # marks: 0, the chunks' split points, len(text); cum[i]: tokens of text[:marks[i]].
        self._marks, self._cum = marks, cum
        self._counted: dict[tuple[int, int], int] = {}

    @property
    def total(self) -> int:
        return self._cum[-1]

    def _encoded(self, start: int, stop: int) -> list[int]:
        return self.enc.encode_ordinary(self.text[start:stop]) if start < stop else []

    def _chunk(self, i: int) -> list[int]:
        return self._encoded(self._marks[i], self._marks[i + 1])

    def count(self, start: int, stop: int) -> int:
        """Tokens of `text[start:stop]`, as if it were encoded on its own."""
        if start >= stop:
            return 0
        found = self._counted.get((start, stop))
        if found is None:  # a cut's check counts what its caller counts again: remember it
            found = self._counted[start, stop] = self._count(start, stop)
        return found

    def _count(self, start: int, stop: int) -> int:
        marks, cum = self._marks, self._cum
        first = bisect_left(marks, start)  # the first split point at or past `start`
        last = bisect_right(marks, stop) - 1  # the last one at or before `stop`
        if first > last:
            return len(self._encoded(start, stop))
        edges = len(self._encoded(start, marks[first])) + len(self._encoded(marks[last], stop))
        return edges + cum[last] - cum[first]

    def count_joined(self, head: int, middle: str, tail: int) -> int:
        """Tokens of `text[:head] + middle + text[len(text) - tail:]`, encoded as one."""
        marks, cum, text = self._marks, self._cum, self.text
        back = len(text) - tail
        # Split points inside the head and the tail stay split points of the join, unless
        # the head ends in the spaces after one, which `middle` might extend with a newline.
        before = max(0, bisect_left(marks, head) - 1)
        while before and text[marks[before] : head].isspace():
            before -= 1
        after = min(len(marks) - 1, bisect_right(marks, back))
        joint = text[marks[before] : head] + middle + text[back : marks[after]]
        return cum[before] + counter_of(self.enc)(joint) + self.total - cum[after]

    def head_window(self, span: int) -> _HeadWindow:
        """The first `span` characters' tokens, as `cuts.fit` reads them."""
        return _HeadWindow(self, min(span, len(self.text)))

    def tail_window(self, span: int) -> _TailWindow:
        """The last `span` characters' tokens, as `cuts.fit` reads them."""
        return _TailWindow(self, min(span, len(self.text)))


class _HeadWindow:
    """`text[:chars]`: whole chunks up to the last split point, then a rest encoded only
    when needed (the chunks alone usually hold more tokens than a cut asks for)."""

    __slots__ = ("_last", "_p", "_rest", "chars")

    def __init__(self, profile: Profile, chars: int) -> None:
        self._p, self.chars = profile, chars
        self._last = bisect_right(profile._marks, chars) - 1
        self._rest: list[int] | None = None

    def _rest_tokens(self) -> list[int]:
        if self._rest is None:
            self._rest = self._p._encoded(self._p._marks[self._last], self.chars)
        return self._rest

    @property
    def tokens(self) -> int:
        return self._p._cum[self._last] + len(self._rest_tokens())

    def more_than(self, n: int) -> bool:
        return self._p._cum[self._last] > n or self.tokens > n

    def head_chars(self, k: int) -> int:
        p = self._p
        marks, cum = p._marks, p._cum
        if k >= cum[self._last]:
            tokens, i = self._rest_tokens(), self._last
        else:
            i = bisect_right(cum, k) - 1  # the chunk holding token k
            tokens = p._chunk(i)
        # Chunks start at a character boundary, so characters add up across them.
        return marks[i] + prefix_chars(p.enc.decode_bytes(tokens[: k - cum[i]]))


class _TailWindow:
    """`text[-chars:]`: a start encoded only when needed, then whole chunks from the first
    split point on."""

    __slots__ = ("_first", "_p", "_start", "chars")

    def __init__(self, profile: Profile, chars: int) -> None:
        self._p, self.chars = profile, chars
        self._first = bisect_left(profile._marks, len(profile.text) - chars)
        self._start: list[int] | None = None

    def _start_tokens(self) -> list[int]:
        if self._start is None:
            p = self._p
            self._start = p._encoded(len(p.text) - self.chars, p._marks[self._first])
        return self._start

    def _chunked(self) -> int:
        """Tokens from the first split point on."""
        return self._p.total - self._p._cum[self._first]

    @property
    def tokens(self) -> int:
        return len(self._start_tokens()) + self._chunked()

    def more_than(self, n: int) -> bool:
        return self._chunked() > n or self.tokens > n

    def tail_chars(self, k: int) -> int:
        p = self._p
        marks, cum, n = p._marks, p._cum, len(p.text)
        chunks = self._chunked()
        if k > chunks:
            taken = p.enc.decode_bytes(self._start_tokens()[-(k - chunks) :])
            return lead_bytes(taken) + n - marks[self._first]
        keep = p.total - k  # tokens before the last k
        i = bisect_right(cum, keep) - 1  # the chunk where the last k tokens begin
        taken = p.enc.decode_bytes(p._chunk(i)[-(cum[i + 1] - keep) :])
        return lead_bytes(taken) + n - marks[i + 1]
