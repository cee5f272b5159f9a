"""The per-message formula (`policies.formula`) called directly: odd shapes, the `Sink`,
and the additivity curators rely on. The cookbook numbers themselves, through the token
counter and real encodings, are in `tests/policies/test_tokens.py`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.formula import (
    CALL_TOKENS,
    PART_SEPARATOR,
    TOKENS_PER_MESSAGE,
    Sink,
    content_tokens,
    count,
    message_tokens,
)
from policies.images import LOW_DETAIL, MAX_IMAGE_TOKENS, MAX_PATCHES
from policies.splits import PROFILE_MIN_CHARS
from policies.tokens import TokenCounter
from tests.factories import CharEncoder

ENC = CharEncoder("chars")  # one token per character


def tokens(msg: object, **kwargs: Any) -> int:
    return message_tokens(msg, ENC, **kwargs)  # type: ignore[arg-type]


class Counting(CharEncoder):
    """Counts through its own `count`, which the formula must prefer to encoding."""

    def count(self, text: str) -> int:
        return 100 + len(text)

    def encode_ordinary(self, text: str) -> list[int]:
        raise AssertionError(f"count() should have been used for {text!r}")


def test_count_of_empty_text_encodes_nothing() -> None:
    enc = CharEncoder("chars")
    assert count(enc, "") == 0
    assert enc.encoded == []
    assert count(enc, "abc") == 3


def test_count_prefers_an_encoders_own_counter() -> None:
    assert count(Counting("c"), "abc") == 103


@pytest.mark.parametrize("msg", [None, "hello", 42, ["role", "user"]])
def test_a_message_that_is_not_a_mapping_costs_the_overhead(msg: object) -> None:
    assert tokens(msg) == TOKENS_PER_MESSAGE


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        ({}, 3),
        ({"role": "user", "content": "hi"}, 3 + 4 + 2),
        ({"role": "user", "name": "bob", "content": "hi"}, 3 + 4 + 3 + 1 + 2),
        ({"role": "user", "content": None, "extra": 5, "flag": True}, 3 + 4),
        ({"role": "tool", "tool_call_id": "c1", "content": "ok"}, 3 + 4 + 2 + 2),
        ({"role": "assistant", "tool_calls": "nope"}, 3 + 9),
        ({"role": "assistant", "tool_calls": [None, 3, "x"]}, 3 + 9),
        ({"role": "assistant", "function_call": "nope"}, 3 + 9),
        ({"role": "assistant", "function_call": {"name": "f"}}, 3 + 9 + CALL_TOKENS + 1),
        (
            {"role": "assistant", "function_call": {"name": "f", "arguments": "{}", "x": "y"}},
            3 + 9 + CALL_TOKENS + 1 + 2,
        ),
    ],
)
def test_message_shapes(msg: dict[str, Any], expected: int) -> None:
    assert tokens(msg) == expected


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({}, CALL_TOKENS),
        ({"id": "abc"}, CALL_TOKENS + 3),
        ({"id": 7, "function": {"name": "ls"}}, CALL_TOKENS + 2),
        ({"function": {"name": "ls", "arguments": "{}"}}, CALL_TOKENS + 2 + 2),
        ({"custom": {"name": "sql", "input": "select"}}, CALL_TOKENS + 3 + 6),
        # A call with a `function` reads it, whatever `custom` says.
        ({"function": {"name": "a"}, "custom": {"name": "bbbb"}}, CALL_TOKENS + 1),
        ({"function": "not a mapping", "custom": {"name": "bb"}}, CALL_TOKENS + 2),
        ({"function": {"name": 3, "arguments": None}}, CALL_TOKENS),
    ],
)
def test_each_call_costs_its_overhead_id_name_and_arguments(
    call: dict[str, Any], expected: int
) -> None:
    msg = {"tool_calls": [call]}
    assert tokens(msg) == TOKENS_PER_MESSAGE + expected


# -- content ----------------------------------------------------------------------------


def text(value: str, kind: str = "text") -> dict[str, str]:
    return {"type": kind, kind: value}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("abc", 3),
        ("", 0),
        (None, 0),
        (17, 0),
        ({"type": "text", "text": "abc"}, 0),  # a single part, not a list of them
        ([], 0),
        ([text("ab")], 2),
        ([text("ab"), text("cde")], 2 + 3 + PART_SEPARATOR),
        ([text("ab"), text("no", "refusal"), text("x")], 2 + 2 + 1 + 2 * PART_SEPARATOR),
        ([text("ab"), "junk", None, 5, text("c")], 2 + 1 + PART_SEPARATOR),
        # A text part without a string text costs nothing, nor counts toward separators.
        ([{"type": "text", "text": 5}, text("ab")], 2),
        ([{"type": "refusal"}], 0),
    ],
)
def test_content_tokens(content: object, expected: int) -> None:
    assert content_tokens(content, ENC) == expected


def test_image_parts_are_priced_by_the_pricing_given() -> None:
    low = [{"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]
    assert content_tokens(low, ENC) == LOW_DETAIL
    assert content_tokens(low, ENC, "patches") == MAX_PATCHES
    auto = [{"type": "image_url", "image_url": "https://x/y.png"}]
    assert content_tokens(auto, ENC) == MAX_IMAGE_TOKENS
    msg = {"role": "user", "content": low}
    assert tokens(msg, images="patches") == 3 + 4 + MAX_PATCHES


def test_audio_and_unknown_parts() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "A" * 16_000, "format": "mp3"}}
    # 12,000 bytes at 8,000 bytes a second: 1.5 s at 10 tokens a second.
    assert content_tokens([audio], ENC) == 15
    assert content_tokens([{"type": "input_audio"}], ENC) == 0
    odd = {"type": "file", "file": {"file_id": "f1"}}
    assert content_tokens([odd], ENC) == len('{"type":"file","file":{"file_id":"f1"}}')


# -- additivity -------------------------------------------------------------------------

CONTENTS = st.one_of(
    st.none(),
    st.text(max_size=30),
    st.lists(st.builds(text, st.text(max_size=10)), max_size=3),
)


@settings(max_examples=80)
@given(before=CONTENTS, after=CONTENTS, name=st.one_of(st.none(), st.text(max_size=5)))
def test_replacing_the_content_changes_the_count_by_exactly_its_difference(
    before: object, after: object, name: str | None
) -> None:
    msg: dict[str, Any] = {"role": "user", "content": before}
    if name is not None:
        msg["name"] = name
    changed = {**msg, "content": after}
    difference = content_tokens(after, ENC) - content_tokens(before, ENC)
    assert tokens(changed) - tokens(msg) == difference


# -- the sink ---------------------------------------------------------------------------


def test_a_sink_keeps_each_messages_count_without_its_content() -> None:
    sink = Sink()
    first = {"role": "user", "name": "bob", "content": "hello"}
    second = {"role": "assistant", "content": [text("ab"), text("cd")]}
    third = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]}
    assert tokens(first, sink=sink) == 3 + 4 + 3 + 1 + 5
    assert tokens(second, sink=sink) == 3 + 9 + 5
    assert tokens(third, sink=sink) == 3 + 9 + CALL_TOKENS + 1
    assert sink.bare == {
        id(first): 3 + 4 + 3 + 1,
        id(second): 3 + 9,
        id(third): 3 + 9 + CALL_TOKENS + 1,
    }
    assert sink.profiles == {}  # CharEncoder has no split rule


def test_a_sink_does_not_change_any_count() -> None:
    msg = {"role": "user", "content": "x" * 5000, "name": "n"}
    assert tokens(msg, sink=Sink()) == tokens(msg)


def test_a_sink_skips_what_is_not_a_message() -> None:
    sink = Sink()
    assert tokens("not a message", sink=sink) == TOKENS_PER_MESSAGE
    assert sink.bare == {}


PROSE = "The quick brown fox jumps over the lazy dog.\n" * 100  # 4,500 characters


def test_a_sink_profiles_long_contents_with_a_real_encoding(exact: TokenCounter) -> None:
    enc = exact.encoder("gpt-4o")
    sink = Sink()
    short = {"role": "user", "content": PROSE[: PROFILE_MIN_CHARS - 1]}
    long = {"role": "user", "content": PROSE}
    assert message_tokens(short, enc, sink) == message_tokens(short, enc)
    assert message_tokens(long, enc, sink) == message_tokens(long, enc)
    assert list(sink.profiles) == [id(long["content"])]
    profile = sink.profiles[id(long["content"])]
    assert profile.text is long["content"]
    assert profile.total == len(enc.encode_ordinary(PROSE))
    assert sink.bare[id(long)] == 3 + len(enc.encode_ordinary("user"))


@pytest.mark.parametrize(
    ("least", "profiled"),
    [(None, False), (len(PROSE) + 1, False), (len(PROSE), True), (1, True)],
)
def test_profile_chars_sets_how_long_a_profiled_content_is(
    exact: TokenCounter, least: int | None, profiled: bool
) -> None:
    enc = exact.encoder("gpt-4o")
    sink = Sink()
    sink.profile_chars = least
    msg = {"role": "user", "content": PROSE}
    assert message_tokens(msg, enc, sink) == message_tokens(msg, enc)
    assert bool(sink.profiles) is profiled
    # Below PROFILE_MIN_CHARS nothing is profiled, whatever profile_chars says.
    small = {"role": "user", "content": PROSE[:100]}
    message_tokens(small, enc, sink)
    assert id(small["content"]) not in sink.profiles


def test_list_contents_are_never_profiled(exact: TokenCounter) -> None:
    enc = exact.encoder("gpt-4o")
    sink = Sink()
    msg = {"role": "user", "content": [text(PROSE)]}
    assert message_tokens(msg, enc, sink) == 3 + 1 + len(enc.encode_ordinary(PROSE))
    assert sink.profiles == {}
