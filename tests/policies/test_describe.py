"""Placeholder descriptions (`policies.describe`): sizes, string walking, and each kind's edges.

The common kinds (csv, log, code, hits, pytest...) are in
`tests/policies/test_history_retention.py`; these cover thresholds and odd inputs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.describe import (
    content_bytes,
    content_chars,
    describe,
    describe_text,
    size_label,
    strings,
)


@pytest.mark.parametrize(
    ("n_bytes", "label"),
    [
        (1024 * 1024 - 1, "1,024 KB"),
        (1024 * 1024, "1.0 MB"),
        (10 * 2**30, "10,240.0 MB"),
        (1024 * 999 + 100, "999 KB"),
    ],
)
def test_size_label_edges(n_bytes: int, label: str) -> None:
    assert size_label(n_bytes) == label


def test_strings_walks_values_of_any_nesting_but_not_keys() -> None:
    value = {"k": ["a", ("b", {"c": 1, "d": "e"})], "n": None, "f": 1.5}
    assert sorted(strings(value)) == ["a", "b", "e"]
    assert list(strings("x")) == ["x"]
    assert list(strings(7)) == []
    assert list(strings({1, "set members are not walked"})) == []


def test_content_bytes_counts_utf8_of_every_string() -> None:
    assert content_bytes("abc") == 3
    assert content_bytes("é€😀") == 2 + 3 + 4
    assert content_bytes("\ud800") == 3  # a lone surrogate is counted, never an error
    assert content_bytes(["é", {"x": "ab"}]) == 4
    assert content_bytes(None) == 0
    assert content_chars("é€😀") == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("data:,hello", "data URL: data"),
        ("  data:text/plain;charset=utf-8,hi", "data URL: text/plain"),
        ("{}", "json: object with 0 keys"),
        ("[1]", "json: array of 1 item"),
        (' {"a": 1}\n', "json: object with 1 key"),
        ("{bad", "text: 1 line, 1 word"),
        ("123", "text: 1 line, 1 word"),  # JSON, but not a container
        ('"quoted"', "text: 1 line, 1 word"),
        ("a" * 63, "text: 1 line, 1 word"),
        ("a" * 64, "base64 blob"),
        (("QUJD" * 19 + "\n") * 5, "base64 blob"),  # wrapped at 76 columns
        ("x\ufffd" * 10 + "y" * 300, "text: 1 line, 1 word"),  # 3% odd characters
        ("x\ufffd" * 10 + "y" * 100, "binary data"),  # 8%
        ("", "text: 0 lines, 0 words"),
        ("   \n\n  ", "text: 0 lines, 0 words"),
    ],
)
def test_describe_text_thresholds(text: str, expected: str) -> None:
    assert describe_text(text) == expected


LOG2 = "2024-01-01 00:00 INFO a\n2024-01-01 00:00 INFO b"
SUMMARY = "===== 1 passed in 0.1s ====="


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LOG2, "text: 2 lines, 8 words"),  # two lines are too few to judge
        (LOG2 + "\nplain", "log: 3 lines"),
        ("a\nb\nc\nd\nERROR x\n", "text: 5 lines, 6 words"),  # 1 in 5 is under 30%
        ("a\nb\nWARN c\nERROR d\n", "log: 4 lines, 1 error line"),
        ("a, b\nc, d\ne, f\n", "text: 3 lines, 6 words"),  # one comma a line is prose
        ("a,b,c\n1,2,3\n4,5,6\n", "table: 3 rows"),
        ("a;b;c\n1;2;3\n4;5;6", "table: 3 rows"),
        ("| a |\n| b |\n| c |", "table: 3 rows"),  # no separator row: every row counts
        ("one\ntwo\nthree\nfour\nfive\nsix\n" + SUMMARY, "test output: 7 lines, 1 passed"),
        (SUMMARY + "\none\ntwo\nthree\nfour\nfive\nsix", "text: 7 lines, 12 words"),
        ("x\ny\n= " + "a" * 200 + " 1 passed in 0.1s =", "text: 3 lines, 9 words"),
        ("\n".join(f"line {i}" for i in range(1500)), "text: 1,500 lines, 3,000 words"),
        (
            "a.py:1: x\nb.py:2: y\nnot a hit\nc.py:3: z\na.py:9: w",
            "search hits: 4 lines in 3 files",
        ),
        ("a.py:1: x\nb.py:2: y\nnot a hit\nnor this", "text: 4 lines, 9 words"),
    ],
)
def test_line_kinds_need_enough_agreeing_lines(text: str, expected: str) -> None:
    assert describe_text(text) == expected


def test_a_numbered_listing_is_judged_by_what_it_lists() -> None:
    listing = "\n".join(f"{i:6d}\tword{i}, more{i}, and{i}" for i in range(1, 6))
    assert describe_text(listing) == "table: 5 rows"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("hello world", "text: 1 line, 2 words, ~11 B"),
        (None, "empty content, ~0 B"),
        (5, "empty content, ~0 B"),
        ({"text": "xyz"}, "empty content, ~3 B"),  # not a list of parts
        (
            [{"type": "text", "text": "one two"}, {"type": "text", "text": " three"}],
            "text: 1 line, 3 words, ~21 B",  # texts are joined; every string is sized
        ),
        (
            [{"type": "image_url", "image_url": {"url": "u"}}] * 2,
            "2 images, ~20 B",
        ),
        ([{"type": "file"}, {"type": "input_audio"}], "2 other parts, ~15 B"),
        ([{"type": "text", "text": 7}], "1 other part, ~4 B"),
    ],
)
def test_describe_content_shapes(content: object, expected: str) -> None:
    assert describe(content) == expected


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@settings(max_examples=80)
@given(content=JSONISH)
def test_any_content_gets_a_deterministic_description_ending_in_its_size(content: Any) -> None:
    found = describe(content)
    assert found == describe(content)
    assert found.endswith(", ~" + size_label(content_bytes(content)))


@settings(max_examples=80)
@given(text=st.text(st.characters(exclude_categories=()), max_size=200))
def test_any_text_is_described_without_raising(text: str) -> None:
    kind = describe_text(text)
    assert kind.split(":")[0] in {
        "text",
        "json",
        "binary data",
        "base64 blob",
        "image",
        "data URL",
        "table",
        "log",
        "code",
        "search hits",
        "test output",
    }
    assert describe(text) == f"{kind}, ~{size_label(content_bytes(text))}"
