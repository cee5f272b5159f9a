"""Split points and profiles: counting a long text piecewise gives tiktoken's exact answers."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from functools import cache

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import splits
from policies.cuts import fit, fit_chars
from policies.encoders import EstimatingEncoder
from policies.split_rules import SPLITS
from policies.splits import Profile
from tests.factories import CharEncoder

ENCODINGS = ("o200k_base", "cl100k_base")
# Characters that stress the pre-tokenizers: every kind of whitespace (Python's and the
# Unicode White_Space property differ on \x1c-\x1f), "/" and "'" (o200k's trailing
# newline rule, contractions), digits, marks, CJK, an emoji, a title-case letter.
TRICKY = (
    "ab Z9é日本😀ǅ١\u0301'/.:;{}[]()\"-_#"
    "\n\r\t\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\u200b"
)
PIECES = (*TRICKY, "'ll", "\r\n", "  ", "\n/", "0123", "//", " /", "\n    1\t", "\n  ", "\n\t{")


@cache
def encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def encode(name: str, text: str) -> list[int]:
    return encoding(name).encode_ordinary(text)


def split_points(name: str, text: str) -> list[int]:
    return [m.end() for m in SPLITS[name].finditer(text)]


def texts(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(2, 60)))


@pytest.mark.parametrize("name", ENCODINGS)
def test_a_split_point_splits_the_encoding_of_every_slice_around_it(name: str) -> None:
    checked = 0
    for text in texts(seed=7, count=400):
        for x in split_points(name, text):
            for start in range(x):
                for stop in (x, x + 1, x + 3, len(text)):
                    whole = encode(name, text[start:stop])
                    assert whole == encode(name, text[start:x]) + encode(name, text[x:stop])
                    checked += 1
    assert checked > 1_000


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_rule_holds_whatever_character_follows_the_newline(name: str) -> None:
    # The full sweep of every code point ran once (minutes); this takes every 389th (a
    # prime: every plane and block is still sampled; every 97th took 20 s a run).
    contexts = (("ab  \n", " x"), ("1;\n", "'s\n"), (" \n\n", "\n"), ("é:\n", "  \n"))
    for code in range(0, 0x110000, 389):
        if 0xD800 <= code < 0xE000:
            continue
        for before, after in contexts:
            text = before + chr(code) + after
            x = len(before)
            if x not in split_points(name, text):
                continue
            for start in range(x):
                for stop in range(x, len(text) + 1):
                    whole = encode(name, text[start:stop])
                    assert whole == encode(name, text[start:x]) + encode(name, text[x:stop])


def test_cl100k_does_not_split_before_indentation() -> None:
    # cl100k's `\s++$` joins a newline to the spaces after it when a text ends there.
    assert split_points("cl100k_base", "a\n    b\nc") == [8]
    assert split_points("o200k_base", "a\n    b\nc") == [2, 8]
    assert split_points("o200k_base", "a\n/b\n  \nc") == [8]


def test_only_tiktokens_own_encodings_have_a_rule() -> None:
    assert splits.splits(encoding("o200k_base")) is SPLITS["o200k_base"]
    assert splits.splits(encoding("cl100k_base")) is SPLITS["cl100k_base"]
    # An encoding built under a checked name may pre-tokenize differently (this is
    # gpt2's whitespace rule): the split rule was never checked for it.
    built = tiktoken.Encoding(
        "o200k_base", pat_str=r"\s+(?!\S)|\s+|\S+", mergeable_ranks={b"a": 0}, special_tokens={}
    )
    assert splits.splits(built) is None
    assert splits.splits(CharEncoder("o200k_base")) is None  # not tiktoken's, whatever its name
    assert splits.splits(EstimatingEncoder("o200k_base")) is None


def profiled(name: str, text: str, monkeypatch: pytest.MonkeyPatch, chunk: int) -> Profile:
    monkeypatch.setattr(splits, "CHUNK_CHARS", chunk)
    return Profile(encoding(name), text, SPLITS[name])


def long_text(seed: int) -> str:
    """Numbered code-like lines, indented ones, JSON, prose with non-ASCII, blank lines."""
    rng = random.Random(seed)
    lines = []
    for i in range(rng.randint(50, 200)):
        kind = rng.randrange(5)
        if kind == 0:
            lines.append(f"{i:6d}\tdef handler_{i}(event):  # café ☕")
        elif kind == 1:
            lines.append(" " * rng.randrange(12) + f'"key_{i}": [{i}, "日本語 {i}"],')
        elif kind == 2:
            lines.append(f"/usr/lib/python3/site-packages/mod_{i}.py:{i}: warning")
        elif kind == 3:
            lines.append("")
        else:
            lines.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 30))))
    return "\n".join(lines)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("chunk", [1, 64, 512])
def test_a_profile_counts_every_slice_and_join_exactly(
    name: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(chunk)
    for seed in range(3):
        text = long_text(seed)
        profile = profiled(name, text, monkeypatch, chunk)
        n = len(text)
        assert profile.total == len(encode(name, text))
        assert profile.size == len(text.encode())
        for _ in range(150):
            start = rng.randint(0, n)
            stop = rng.randint(start, n)
            assert profile.count(start, stop) == len(encode(name, text[start:stop]))
            head = rng.randint(0, n)
            tail = rng.randint(0, n - head)
            # The markers cutting curators put in; a middle starting with a newline is
            # the case where spaces ending the head would join it.
            middle = rng.choice(["\n\n[... 1,234 tokens truncated ...]\n\n", "", "\n", " /"])
            joined = text[:head] + middle + text[n - tail :]
            assert profile.count_joined(head, middle, tail) == len(encode(name, joined))


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("chunk", [1, 512])
def test_a_profile_finds_the_same_cuts_as_encoding_windows(
    name: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed in range(3):
        text = long_text(seed)
        profile = profiled(name, text, monkeypatch, chunk)
        for limit in (1, 2, 7, 50, 333, 1_000, 2_500, 10_000):
            for from_end in (False, True):
                expected = fit_chars(encoding(name), text, limit, from_end=from_end)
                assert fit(profile, len(text), limit, from_end=from_end) == expected


@settings(max_examples=60)
@given(
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=120).map("".join),
    st.integers(min_value=1, max_value=80),
    st.booleans(),
)
def test_profile_cuts_match_on_arbitrary_text(text: str, limit: int, from_end: bool) -> None:
    for name in ENCODINGS:
        profile = Profile(encoding(name), text, SPLITS[name])
        expected = fit_chars(encoding(name), text, limit, from_end=from_end)
        assert fit(profile, len(text), limit, from_end=from_end) == expected


def test_a_profile_cuts_a_long_text_into_chunks_near_the_chunk_size() -> None:
    text = "\n".join(f"line {i}" for i in range(2_000))
    profile = Profile(encoding("o200k_base"), text, SPLITS["o200k_base"])
    marks = profile._marks
    assert marks[0] == 0
    assert marks[-1] == len(text)
    assert all(text[m - 1] == "\n" and re.match(r"[^\s/]", text[m]) for m in marks[1:-1])
    gaps = [b - a for a, b in itertools.pairwise(marks)][:-1]
    assert gaps
    assert all(splits.CHUNK_CHARS <= gap <= splits.CHUNK_CHARS + 12 for gap in gaps)
