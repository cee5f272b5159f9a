"""protocols/splice: one member's value replaced in the client's bytes, or, when that
cannot be done safely, the decoded body encoded again."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocols.splice import spliced

NEW = [{"role": "user", "content": "short"}]


def _splice(raw: bytes) -> bytes:
    return spliced(raw, orjson.loads(raw), "messages", NEW)


def test_every_byte_outside_the_value_is_kept() -> None:
    head = b' {"seed" : 18446744073709551617, "t": 1E2, "s": "caf\\u00e9 \\/", "messages":\n '
    tail = b' ,\t"x": {"messages": -0, "n": 1.50} }\n'
    raw = head + b'[{"role": "user", "content": "long, \\"x\\": 1"}]' + tail
    assert _splice(raw) == head + orjson.dumps(NEW) + tail


def test_the_value_last_and_first() -> None:
    assert _splice(b'{"n":1E2,"messages":[]}') == b'{"n":1E2,"messages":' + orjson.dumps(NEW) + b"}"
    assert _splice(b'{"messages":[],"n":1E2}') == b'{"messages":' + orjson.dumps(NEW) + b',"n":1E2}'


def test_a_look_alike_key_nested_after_the_value_is_passed_over() -> None:
    raw = b'{"messages":[{"role":"user","t":1}],"t":1E2,"x":{"t":2, "u": {"t": 3}}}'
    assert (
        _splice(raw)
        == b'{"messages":' + orjson.dumps(NEW) + b',"t":1E2,"x":{"t":2, "u": {"t": 3}}}'
    )


def test_a_duplicated_key_goes_once_with_the_new_value() -> None:
    raw = b'{"messages":[{"role":"user","content":"a"}], "messages": [], "n": 1E2}'
    out = _splice(raw)
    assert orjson.loads(out) == {"messages": NEW, "n": 100.0}
    assert out.endswith(b', "n": 1E2}')


def test_a_key_written_with_escapes_is_encoded_again() -> None:
    raw = b'{"messag\\u0065s": [], "n": 1E2}'
    assert _splice(raw) == orjson.dumps({"messages": NEW, "n": 100.0})


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    before=st.dictionaries(st.sampled_from(["a", "messages", "b", "c"]), JSON, max_size=3),
    after=st.dictionaries(st.sampled_from(["a", "messages", "b", "d"]), JSON, max_size=3),
    messages=st.lists(JSON, max_size=3),
    indent=st.sampled_from([None, 1]),
)
def test_the_result_always_decodes_to_the_body_with_the_new_value(
    before: dict[str, Any], after: dict[str, Any], messages: list[Any], indent: int | None
) -> None:
    # Duplicate keys included: `before`'s may repeat `after`'s, and either may hold one.
    pairs = [*before.items(), ("messages", messages), *after.items()]
    inner = ", ".join(f"{json.dumps(k)}: {json.dumps(v, indent=indent)}" for k, v in pairs)
    raw = ("{" + inner + "}").encode()
    body = orjson.loads(raw)
    if not isinstance(body.get("messages"), list):
        return
    out = spliced(raw, body, "messages", NEW)
    assert list(orjson.loads(out).items()) == list({**body, "messages": NEW}.items())
