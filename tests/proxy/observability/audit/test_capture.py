"""observability/audit/capture.py: `BodyCapture` keeps the relayed bytes in order, up to its
cap, and says whether it had to cut them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.capture import DEFAULT_MAX_BYTES, BodyCapture


def fed(max_bytes: int, *chunks: bytes) -> BodyCapture:
    capture = BodyCapture(max_bytes)
    for chunk in chunks:
        capture.feed(chunk)
    return capture


def test_a_new_capture_is_empty_with_the_default_cap() -> None:
    capture = BodyCapture()
    assert DEFAULT_MAX_BYTES == 4 * 1024 * 1024
    assert (capture.max_bytes, capture.size, capture.data(), capture.truncated) == (
        4_194_304,
        0,
        b"",
        False,
    )


def test_chunks_are_kept_in_order() -> None:
    capture = fed(100, b"data: {", b"}\n\n", b"", b"data: [DONE]\n\n")
    assert capture.data() == b"data: {}\n\ndata: [DONE]\n\n"
    assert capture.size == 24
    assert capture.truncated is False


def test_exactly_the_cap_is_not_truncated() -> None:
    capture = fed(10, b"12345", b"67890")
    assert (capture.data(), capture.size, capture.truncated) == (b"1234567890", 10, False)


def test_one_byte_past_the_cap_is_truncated() -> None:
    capture = fed(10, b"12345", b"67890", b"x")
    assert (capture.data(), capture.size, capture.truncated) == (b"1234567890", 10, True)


def test_a_chunk_crossing_the_cap_is_cut_at_it() -> None:
    capture = fed(10, b"123456", b"789abc")
    assert (capture.data(), capture.size, capture.truncated) == (b"123456789a", 10, True)


def test_one_chunk_bigger_than_the_cap() -> None:
    capture = fed(3, b"abcdef")
    assert (capture.data(), capture.size, capture.truncated) == (b"abc", 3, True)


def test_an_empty_chunk_at_the_cap_truncates_nothing() -> None:
    capture = fed(4, b"abcd", b"")
    assert capture.truncated is False


def test_truncation_sticks_and_nothing_more_is_kept() -> None:
    capture = fed(4, b"abcdef", b"gh", b"")
    assert (capture.data(), capture.size, capture.truncated) == (b"abcd", 4, True)


@pytest.mark.parametrize(("chunk", "truncated"), [(b"", False), (b"a", True)])
def test_a_zero_cap_keeps_nothing(chunk: bytes, truncated: bool) -> None:
    capture = fed(0, chunk)
    assert (capture.data(), capture.size, capture.truncated) == (b"", 0, truncated)


def test_a_cap_lowered_below_what_is_held_keeps_what_is_held() -> None:
    capture = fed(10, b"12345678")
    capture.max_bytes = 4
    capture.feed(b"abcde")  # no room at all: nothing of it is kept
    assert (capture.data(), capture.size, capture.truncated) == (b"12345678", 8, True)


def test_a_capture_has_no_room_for_other_attributes() -> None:
    with pytest.raises(AttributeError):
        setattr(BodyCapture(), "extra", 1)  # noqa: B010 (mypy would refuse the plain form)


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(st.binary(max_size=20), max_size=10), max_bytes=st.integers(0, 80))
def test_the_capture_is_the_relayed_bytes_up_to_the_cap(
    chunks: list[bytes], max_bytes: int
) -> None:
    capture = fed(max_bytes, *chunks)
    relayed = b"".join(chunks)
    assert capture.data() == relayed[:max_bytes]
    assert capture.size == len(capture.data())
    assert capture.truncated == (len(relayed) > max_bytes)
