"""proxy/protocols/lifted.py: a huge body decodes to exactly what `orjson.loads` gives (or
fails as it fails), its long strings a piece at a time, so no one call holds the GIL for
the whole body (issue U item 4: 45-60 ms for a 25 MB prompt)."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from proxy.protocols import lifted

BIG = lifted.LIFT_BYTES + 1000


def _same(raw: bytes) -> None:
    want: Any
    try:
        want = orjson.loads(raw)
    except orjson.JSONDecodeError:
        want = "error"
    try:
        got = lifted.loads(raw)
    except orjson.JSONDecodeError:
        got = "error"
    assert got == want


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_long_strings_are_lifted_and_decoded_exactly(ensure_ascii: bool) -> None:
    for text in ("a" * BIG, "😀é\n\\ x" * (BIG // 10)):  # no quote: \" ends a stretch
        body = {"model": "m", "messages": [{"role": "user", "content": text}], "n": 1}
        raw = json.dumps(body, ensure_ascii=ensure_ascii).encode()
        assert lifted._lifted(raw) == orjson.loads(raw)  # lifted, not decoded whole


@pytest.mark.parametrize("seed", range(4))
def test_any_escapes_and_characters_decode_as_one_call_does(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["\\", '"', "x", "\n", "é", "😀", "\u2028", "abc ", "\\u", "\x1e"]
    text = "".join(rng.choice(alphabet) for _ in range(BIG // 3))
    for ensure_ascii in (True, False):
        _same(
            json.dumps(
                {"messages": [{"content": text}], "k": "v"}, ensure_ascii=ensure_ascii
            ).encode()
        )


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": "' + b"x" * BIG + b'"',  # unterminated
        b'{"a": "' + b"x" * BIG + b'\xff"}',  # not UTF-8
        b'{"' + b"k" * BIG + b'": 1}',  # a key
        b'{"a": [' + b"1," * BIG + b"1]}",  # numbers, no string
        b'{"a": "x", "b": ' + b" " * BIG + b'"y"}',  # blanks between strings
        b'{"a": "' + b"x" * BIG + b'", "b": "\\u001ecurator-lifted-0\\u001e"}',  # the marker
        b'["' + b"\\n" * (BIG // 2) + b'"]',  # escapes all the way: decoded whole
    ],
)
def test_what_cannot_be_lifted_is_decoded_whole(raw: bytes) -> None:
    _same(raw)


def test_no_call_decodes_more_than_a_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    # One orjson call over a 25 MB prompt held the GIL 45-60 ms; a piece holds it ~1 ms.
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "a" * 25_000_000}]})
    sizes: list[int] = []
    loads = orjson.loads

    def counted(data: bytes) -> Any:
        sizes.append(len(data))
        return loads(data)

    monkeypatch.setattr(orjson, "loads", counted)
    assert lifted.loads(raw) == loads(raw)
    assert len(sizes) > 20
    assert max(sizes) <= lifted.PIECE + 2 + lifted._SEARCH
