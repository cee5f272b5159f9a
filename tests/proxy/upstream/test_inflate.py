"""inflate.py: gzip and deflate bodies inflated within a limit, in steps, whole or refused."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest

from proxy.upstream.inflate import INLINE_BYTES, InflateError, Inflater, inflate

TEXT = b'{"choices": [{"message": {"content": "a summary"}}]}'


@pytest.mark.parametrize("packed", [gzip.compress(TEXT), zlib.compress(TEXT)], ids=["gzip", "zlib"])
def test_a_body_within_the_limit_is_inflated_whole(packed: bytes) -> None:
    assert asyncio.run(inflate(packed, len(TEXT))) == TEXT


def test_every_gzip_member_is_inflated() -> None:
    assert asyncio.run(inflate(gzip.compress(TEXT[:9]) + gzip.compress(TEXT[9:]), 1000)) == TEXT


def test_one_byte_past_the_limit_is_refused() -> None:
    with pytest.raises(InflateError, match="past 52 bytes"):
        asyncio.run(inflate(gzip.compress(TEXT + b" "), len(TEXT)))


@pytest.mark.parametrize(
    "bad", [b"not gzip", gzip.compress(TEXT)[:-8], gzip.compress(TEXT)[:12]], ids=str
)
def test_a_corrupt_or_cut_short_body_is_refused(bad: bytes) -> None:
    with pytest.raises(InflateError):
        asyncio.run(inflate(bad, 1000))


def test_a_step_makes_at_most_what_it_is_asked_for() -> None:
    inflater = Inflater(gzip.compress(b"z" * (5 * INLINE_BYTES)), 10 * INLINE_BYTES)
    assert inflater.step(INLINE_BYTES) is False  # the rest is left for `finish`
    assert len(inflater.finish()) == 5 * INLINE_BYTES


def test_a_bomb_is_refused_at_the_limit_not_at_its_size() -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), 9)  # ~64 KB that inflate to 64 MB
    with pytest.raises(InflateError, match="past 1048576 bytes"):
        asyncio.run(inflate(bomb, 1024 * 1024))
