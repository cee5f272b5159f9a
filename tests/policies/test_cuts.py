"""Head and tail cuts (`policies.cuts`): the UTF-8 helpers, and `fit` on any `Source`.

`tests/policies/test_encoders.py` checks cuts through the token counter with real
encodings; here `fit` runs on sources whose exact answer is plain arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.cuts import fit, fit_chars, lead_bytes, prefix_chars
from tests.factories import CharEncoder

# -- UTF-8 helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "chars"),
    [
        (b"", 0),
        (b"abc", 3),
        ("é".encode(), 1),
        ("é".encode()[:1], 0),  # a lead byte alone
        ("a€".encode()[:2], 1),  # one of three bytes
        ("a€".encode()[:3], 1),  # two of three bytes
        ("a€".encode(), 2),
        ("😀".encode()[:3], 0),  # three of four bytes
        ("😀".encode(), 1),
        ("x😀y".encode(), 3),
    ],
)
def test_prefix_chars_counts_whole_characters_only(data: bytes, chars: int) -> None:
    assert prefix_chars(data) == chars


@pytest.mark.parametrize(
    ("data", "chars"),
    [
        (b"", 0),
        (b"abc", 3),
        ("é".encode()[1:], 0),  # a continuation byte alone
        ("€".encode()[1:], 0),
        ("a😀".encode()[-4:], 1),
        ("a😀".encode()[-3:], 0),
        ("ab😀".encode()[-5:], 2),
    ],
)
def test_lead_bytes_counts_characters_that_start_in_the_data(data: bytes, chars: int) -> None:
    assert lead_bytes(data) == chars


TEXT = st.text(max_size=40)  # no lone surrogates: they are not UTF-8


@settings(max_examples=100)
@given(text=TEXT, data=st.data())
def test_helpers_agree_with_decoding_every_cut_of_any_text(text: str, data: st.DataObject) -> None:
    encoded = text.encode("utf-8")
    i = data.draw(st.integers(0, len(encoded)))
    whole = encoded[:i].decode("utf-8", "ignore")
    assert prefix_chars(encoded[:i]) == len(whole)
    assert text.startswith(whole)
    tail = encoded[i:]
    # Characters whose first byte is in the tail: the text's characters from there on.
    starts = [len(text[:k].encode()) for k in range(len(text))]
    assert lead_bytes(tail) == sum(1 for s in starts if s >= i)


# -- fit on a source of known density ---------------------------------------------------


class Dense:
    """A text of `length` characters where every token holds `per` characters."""

    def __init__(self, length: int, per: int) -> None:
        self.length, self.per = length, per
        self.spans: list[tuple[str, int]] = []

    def _tokens(self, chars: int) -> int:
        return math.ceil(chars / self.per)

    def head_window(self, span: int) -> Window:
        self.spans.append(("head", span))
        return Window(self, min(span, self.length))

    def tail_window(self, span: int) -> Window:
        self.spans.append(("tail", span))
        return Window(self, min(span, self.length))

    def count(self, start: int, stop: int) -> int:
        assert 0 <= start <= stop <= self.length
        return self._tokens(stop - start)


class Window:
    def __init__(self, source: Dense, chars: int) -> None:
        self.source, self.chars = source, chars

    @property
    def tokens(self) -> int:
        return self.source._tokens(self.chars)

    def more_than(self, n: int) -> bool:
        return self.tokens > n

    def head_chars(self, k: int) -> int:
        return min(k * self.source.per, self.chars)

    def tail_chars(self, k: int) -> int:
        return min(k * self.source.per, self.chars)


@pytest.mark.parametrize("from_end", [False, True])
@pytest.mark.parametrize(("length", "per", "limit"), [(1000, 1, 10), (100_000, 50, 10)])
def test_fit_finds_the_longest_cut(length: int, per: int, limit: int, from_end: bool) -> None:
    source = Dense(length, per)
    assert fit(source, length, limit, from_end=from_end) == limit * per


@pytest.mark.parametrize("from_end", [False, True])
def test_sparse_text_widens_the_window_without_reading_all_of_it(from_end: bool) -> None:
    # 50 characters a token: the first window (5 characters a token) is far too short.
    source = Dense(1_000_000, 50)
    assert fit(source, source.length, 40, from_end=from_end) == 2000
    spans = [span for _, span in source.spans]
    assert len(spans) > 1
    assert all(later >= earlier + earlier // 4 for earlier, later in pairwise(spans))
    assert spans[-1] < source.length / 100


def test_a_window_just_over_the_limit_is_widened_clear_of_its_edge() -> None:
    # The first window holds 12 tokens for a limit of 10: too close to its cut edge.
    source = Dense(10_000, 10)
    assert fit(source, source.length, 10, from_end=False) == 100
    assert len(source.spans) == 2
    assert source._tokens(source.spans[-1][1]) > 10 + 8


@pytest.mark.parametrize("from_end", [False, True])
@pytest.mark.parametrize(("length", "limit"), [(0, 5), (10, 0), (10, -3)])
def test_nothing_fits_in_nothing(length: int, limit: int, from_end: bool) -> None:
    source = Dense(length, 1)
    assert fit(source, length, limit, from_end=from_end) == 0
    assert source.spans == []


@pytest.mark.parametrize("from_end", [False, True])
def test_a_text_that_fits_whole_is_kept_whole(from_end: bool) -> None:
    source = Dense(30, 3)
    assert fit(source, 30, 10, from_end=from_end) == 30
    assert fit(source, 30, 11, from_end=from_end) == 30
    assert fit(source, 30, 9, from_end=from_end) == 27


class Overcounted(Dense):
    """Every slice costs more tokens alone than any window says: no cut ever fits."""

    def count(self, start: int, stop: int) -> int:
        self.counted = getattr(self, "counted", 0) + 1
        return self._tokens(stop - start) + 1_000


@pytest.mark.parametrize("from_end", [False, True])
def test_when_no_cut_proves_to_fit_the_answer_is_empty(from_end: bool) -> None:
    source = Overcounted(10_000, 1)
    assert fit(source, source.length, 5, from_end=from_end) == 0
    assert source.counted == 1  # the first excess already rules out every shorter k


class OneOver(Dense):
    """Each slice costs exactly one token more alone than in the window."""

    def count(self, start: int, stop: int) -> int:
        return self._tokens(stop - start) + 1 if stop > start else 0


@pytest.mark.parametrize("from_end", [False, True])
def test_a_cut_that_costs_more_alone_shrinks_by_the_excess(from_end: bool) -> None:
    source = OneOver(10_000, 2)
    assert fit(source, source.length, 10, from_end=from_end) == 18


# -- fit_chars on an encoder ------------------------------------------------------------


class ByteEncoder:
    """One token per UTF-8 byte, so multi-byte characters straddle token edges."""

    name = "bytes"

    def encode_ordinary(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return bytes(tokens)


@settings(max_examples=100)
@given(text=TEXT, limit=st.integers(-1, 50), from_end=st.booleans())
def test_fit_chars_is_the_longest_cut_by_bytes(text: str, limit: int, from_end: bool) -> None:
    def cost(chars: int) -> int:
        return len((text[len(text) - chars :] if from_end else text[:chars]).encode())

    got = fit_chars(ByteEncoder(), text, limit, from_end=from_end)
    best = max(k for k in range(len(text) + 1) if cost(k) <= max(limit, 0))
    assert got == best


def test_fit_chars_with_one_token_a_character() -> None:
    enc = CharEncoder("chars")
    text = "abcdefghij" * 100
    assert fit_chars(enc, text, 7, from_end=False) == 7
    assert fit_chars(enc, text, 7, from_end=True) == 7
    # Only a window near the cut was encoded, never the whole text.
    assert max(map(len, enc.encoded)) < len(text)
    assert fit_chars(enc, text, 5000, from_end=True) == len(text)
