"""protocols/wire.py: SSE event splitting, the last-object scan, count reading and the shape
limits (message counts, nesting depth) every protocol shares."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProxyError
from proxy.protocols.wire import (
    BRACKET_COUNT_MAX_BYTES,
    ORJSON_MAX_LOAD_DEPTH,
    check_count,
    check_depth,
    count_of,
    last_object,
    nesting_too_deep,
    sse_events,
    within_depth,
)


def nested(depth: int) -> list[Any]:
    """A list nested `depth` (at least 1) levels deep, built without recursion."""
    root: list[Any] = []
    node = root
    for _ in range(depth - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def brackets(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- SSE events ---------------------------------------------------------------------------
def test_sse_events_split_on_blank_lines() -> None:
    text = 'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    assert list(sse_events(text)) == ['{"a": 1}', '{"b": 2}', "[DONE]"]


def test_sse_multi_line_data_is_joined_with_newlines() -> None:
    assert list(sse_events("data: one\ndata: two\ndata:three\n\n")) == ["one\ntwo\nthree"]


def test_sse_only_one_leading_space_is_removed() -> None:
    assert list(sse_events("data:  padded \n\n")) == [" padded "]


def test_sse_ignores_fields_other_than_data_and_comments() -> None:
    text = ": keep-alive\n\nevent: response.completed\nid: 7\nretry: 10\ndata: x\n\n"
    assert list(sse_events(text)) == ["x"]


def test_sse_event_without_data_yields_nothing() -> None:
    assert list(sse_events("event: ping\nid: 1\n\n\n\n")) == []
    assert list(sse_events("")) == []


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_sse_accepts_every_line_ending(newline: str) -> None:
    text = f"data: a{newline}data: b{newline}{newline}data: c{newline}{newline}"
    assert list(sse_events(text)) == ["a\nb", "c"]


def test_sse_field_line_without_colon_is_empty_data() -> None:
    assert list(sse_events("data\ndata: x\n\n")) == ["\nx"]


def test_sse_keeps_unicode_line_separators_inside_data() -> None:
    # U+2028 and U+2029 are line breaks to str.splitlines(), not to SSE.
    assert list(sse_events('data: {"t": "a\u2028b\u2029c"}\n\n')) == ['{"t": "a\u2028b\u2029c"}']


def test_sse_stream_cut_before_the_closing_blank_line_still_yields_its_event() -> None:
    assert list(sse_events("data: first\n\ndata: cut")) == ["first", "cut"]


def test_sse_data_field_name_is_case_sensitive() -> None:
    assert list(sse_events("Data: x\nDATA: y\n\n")) == []


# -- the last object under a key ---------------------------------------------------------
def test_last_object_finds_the_last_of_several() -> None:
    data = b'{"usage": {"n": 1}}\n{"usage": {"n": 2}}\n{"usage": {"n": 3}}'
    assert last_object(data, b"usage") == {"n": 3}


def test_last_object_reads_nested_objects() -> None:
    data = b'{"usage": {"a": 1, "d": {"c": 2, "e": {}}}, "x": 0}'
    assert last_object(data, b"usage") == {"a": 1, "d": {"c": 2, "e": {}}}


def bytewise_object_at(data: bytes, start: int) -> Any:
    """The scan byte by byte, as it was written first: what the brace-to-brace one must
    agree with."""
    depth = 0
    for end in range(start, min(len(data), start + 4096)):
        depth += {0x7B: 1, 0x7D: -1}.get(data[end], 0)
        if data[end] == 0x7D and depth == 0:
            try:
                found = orjson.loads(data[start : end + 1])
            except orjson.JSONDecodeError:
                return None
            return found if isinstance(found, dict) else None
    return None


usage_like = st.recursive(
    st.integers(0, 10**6) | st.none(),
    lambda inner: st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=12,
)


@given(value=st.dictionaries(st.sampled_from(["n", "m"]), usage_like, max_size=3), cut=st.data())
@settings(max_examples=300, deadline=None)
def test_last_object_agrees_with_a_bytewise_scan_whole_or_cut(value: Any, cut: Any) -> None:
    data = b'{"usage": ' + orjson.dumps(value) + b', "id": 1}'
    start = data.index(b"{", 1)
    assert last_object(data, b"usage") == bytewise_object_at(data, start) == value
    tail = data[: cut.draw(st.integers(start, len(data)))]  # a body cut anywhere
    assert last_object(tail, b"usage") == bytewise_object_at(tail, start)


def test_last_object_skips_whitespace_around_the_colon() -> None:
    assert last_object(b'"usage" \t\r\n:\n  {"n": 1}', b"usage") == {"n": 1}


@pytest.mark.parametrize(
    "data",
    [
        b'{"model": "gpt-4o"}',  # no such key
        b'{"usage": null}',
        b'{"usage": 5}',
        b'{"usage": [{"n": 1}]}',
        b'{"usage": "{\\"n\\": 1}"}',
        b'{"usage": {"n": 1',  # cut inside the object
        b'{"usage": ',  # cut before it
        b'{"usage"',  # cut after the key
        b'{"usage_total": {"n": 1}}',  # another key that starts the same
        b'{"text": "\\"usage\\": {\\"n\\": 1}"}',  # escaped inside a string
        b'{"usage": {"n": "}"}}',  # a brace inside a string ends the scan early
        b'{"usage": {"n": 1,}}',  # not JSON
    ],
)
def test_last_object_is_none_when_there_is_no_object_to_read(data: bytes) -> None:
    assert last_object(data, b"usage") is None


def test_last_object_ignores_a_key_escaped_after_the_real_one() -> None:
    data = b'{"usage": {"n": 1}, "text": "say \\"usage\\": {}"}'
    assert last_object(data, b"usage") == {"n": 1}


def test_last_object_passes_over_the_key_used_as_a_value() -> None:
    data = b'{"usage": {"n": 1}, "note": "usage", "tags": ["usage" ]}'
    assert last_object(data, b"usage") == {"n": 1}


def test_last_object_is_none_when_the_last_match_is_not_an_object() -> None:
    # The last `"usage"` decides, even where an earlier one held an object.
    assert last_object(b'{"usage": {"n": 1}, "next": {"usage": 0}}', b"usage") is None


def test_last_object_having_passes_over_objects_without_those_keys() -> None:
    data = b'{"usage": {"n": 1}, "metadata": {"usage": "x"}, "m": {"usage": {"k": 2}}}'
    assert last_object(data, b"usage", ("n",)) == {"n": 1}
    assert last_object(data, b"usage", ("z",)) is None


def object_of_size(size: int) -> bytes:
    """`{"k":"xx..."}` of exactly `size` bytes."""
    raw = b'{"k":"' + b"x" * (size - 8) + b'"}'
    assert len(raw) == size
    return raw


def test_last_object_reads_objects_up_to_4096_bytes() -> None:
    assert last_object(b'"usage":' + object_of_size(4096), b"usage") == {"k": "x" * 4088}
    assert last_object(b'"usage":' + object_of_size(4097), b"usage") is None


json_scalars = (
    st.integers(-(2**53), 2**53)
    | st.booleans()
    | st.none()
    | st.text(alphabet="xyz 0-9", max_size=6)
)
json_objects = st.recursive(
    st.dictionaries(st.text(alphabet="abc_", max_size=6), json_scalars, max_size=4),
    lambda inner: st.dictionaries(
        st.text(alphabet="abc_", max_size=6), json_scalars | inner, max_size=4
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(
    prefix=st.binary(max_size=200),
    separator=st.sampled_from([b":", b": ", b" :\n\t", b"\r\n:\r\n"]),
    found=json_objects,
    suffix=st.binary(max_size=60).filter(lambda b: b'"usage"' not in b),
)
def test_last_object_finds_the_last_object_whatever_precedes_it(
    prefix: bytes, separator: bytes, found: dict[str, Any], suffix: bytes
) -> None:
    data = prefix + b'"usage"' + separator + orjson.dumps(found) + suffix
    assert last_object(data, b"usage") == found


# -- counts ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"n": 5}, 5),
        ({"n": 0}, 0),
        ({"n": 2**40}, 2**40),
        ({"n": -1}, None),
        ({"n": True}, None),
        ({"n": False}, None),
        ({"n": 5.0}, None),
        ({"n": "5"}, None),
        ({"n": None}, None),
        ({}, None),
    ],
)
def test_count_of_takes_only_non_negative_integers(data: dict[str, Any], expected: int) -> None:
    assert count_of(data, "n") == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"d": {"c": 3}}, 3),
        ({"d": {"c": 0}}, 0),
        ({"d": {"c": -3}}, None),
        ({"d": {"c": True}}, None),
        ({"d": {}}, None),
        ({"d": 3}, None),
        ({"d": [3]}, None),
        ({"d": None}, None),
        ({"c": 3}, None),
    ],
)
def test_count_of_a_detail_reads_one_level_down(data: dict[str, Any], expected: int | None) -> None:
    assert count_of(data, "d", "c") == expected


# -- message counts ----------------------------------------------------------------------
def test_check_count_accepts_exactly_the_limit() -> None:
    check_count([1, 2, 3], 3, noun="messages", param="messages")
    check_count([], 0, noun="messages", param="messages")


def test_check_count_refuses_one_past_the_limit() -> None:
    with pytest.raises(ProxyError) as raised:
        check_count([1, 2, 3, 4], 3, noun="messages", param="messages")
    err = raised.value
    assert (err.status, err.code, err.type, err.param) == (
        400,
        "too_many_messages",
        "invalid_request_error",
        "messages",
    )
    assert err.message == "The request has 4 messages; the proxy accepts at most 3."


def test_check_count_names_the_noun_and_param_it_is_given() -> None:
    with pytest.raises(ProxyError) as raised:
        check_count(["a"], 0, noun="items", param="input")
    assert (raised.value.code, raised.value.param) == ("too_many_items", "input")
    assert raised.value.message == "The request has 1 items; the proxy accepts at most 0."


@pytest.mark.parametrize("items", [(1, 2, 3), {"a": 1, "b": 2, "c": 3}, "abc", None, 3])
def test_check_count_counts_only_lists(items: object) -> None:
    check_count(items, 1, noun="messages", param="messages")


# -- nesting depth -----------------------------------------------------------------------
def test_nesting_too_deep_is_a_400_naming_the_limit() -> None:
    err = nesting_too_deep(64)
    assert (err.status, err.code, err.type, err.param) == (
        400,
        "nesting_too_deep",
        "invalid_request_error",
        None,
    )
    assert err.message == (
        "The request body nests JSON arrays and objects more than 64 levels deep."
    )


@pytest.mark.parametrize(
    ("root", "depth"),
    [
        (5, 0),
        ("[[[", 0),
        (None, 0),
        ([], 1),
        ({}, 1),
        ([1, "a", None], 1),
        ([[], [], {}], 2),
        ({"a": [1, {"b": "x"}]}, 3),
        ({"a": 1, "b": {"c": {"d": {}}}, "e": []}, 4),
        ((1, (2, (3,))), 0),  # tuples are not JSON containers
    ],
)
def test_within_depth_at_and_one_below_the_depth(root: object, depth: int) -> None:
    assert within_depth(root, depth)
    assert within_depth(root, depth + 1)
    if depth > 0:
        assert not within_depth(root, depth - 1)


def test_within_depth_walks_far_past_the_recursion_limit() -> None:
    deep = nested(20_000)
    assert within_depth(deep, 20_000)
    assert not within_depth(deep, 19_999)


@settings(max_examples=100, deadline=None)
@given(depth=st.integers(0, 60), limit=st.integers(0, 60), in_dict=st.booleans())
def test_within_depth_is_depth_at_most_limit(depth: int, limit: int, in_dict: bool) -> None:
    root: object = nested(depth) if depth else 0
    if in_dict:
        root, depth = {"pad": [1, 2], "v": root}, depth + 1
    assert within_depth(root, limit) == (depth <= limit)


def test_check_depth_accepts_exactly_the_limit() -> None:
    check_depth(brackets(16), nested(16), 16)


def test_check_depth_refuses_one_past_the_limit() -> None:
    with pytest.raises(ProxyError) as raised:
        check_depth(brackets(17), nested(17), 16)
    assert raised.value.code == "nesting_too_deep"
    assert raised.value.message == nesting_too_deep(16).message


def test_check_depth_brackets_inside_strings_do_not_count() -> None:
    raw = orjson.dumps({"text": "[[[[{{{{" * 10})
    check_depth(raw, orjson.loads(raw), 2)


def test_check_depth_walks_a_body_too_big_to_count_brackets_in() -> None:
    body = {"pad": "x" * BRACKET_COUNT_MAX_BYTES, "v": nested(5)}
    raw = orjson.dumps(body)
    assert len(raw) > BRACKET_COUNT_MAX_BYTES
    check_depth(raw, body, 6)
    with pytest.raises(ProxyError, match="more than 5 levels"):
        check_depth(raw, body, 5)


@settings(max_examples=100, deadline=None)
@given(depth=st.integers(1, 40), limit=st.integers(1, 40), big=st.booleans())
def test_check_depth_refuses_exactly_the_bodies_deeper_than_the_limit(
    depth: int, limit: int, big: bool
) -> None:
    body = {"pad": "x" * (BRACKET_COUNT_MAX_BYTES if big else 10), "v": nested(depth)}
    raw = orjson.dumps(body)
    if depth + 1 > limit:
        with pytest.raises(ProxyError, match=f"more than {limit} levels"):
            check_depth(raw, body, limit)
    else:
        check_depth(raw, body, limit)


def test_an_undecodable_body_beyond_the_decoders_depth_is_refused() -> None:
    raw = brackets(ORJSON_MAX_LOAD_DEPTH + 1)
    with pytest.raises(ProxyError) as raised:
        check_depth(raw, None, 64)
    assert raised.value.code == "nesting_too_deep"
    assert raised.value.message == nesting_too_deep(64).message


def test_a_cut_body_far_beyond_the_decoders_depth_is_refused() -> None:
    with pytest.raises(ProxyError, match="more than 64 levels"):
        check_depth(b"[" * (2 * ORJSON_MAX_LOAD_DEPTH), None, 64)


@pytest.mark.parametrize(
    "raw",
    [
        b"{nope",
        b"null",
        b"",
        brackets(ORJSON_MAX_LOAD_DEPTH),  # the decoder's own limit is fine
        b"[1]," * (ORJSON_MAX_LOAD_DEPTH + 1),  # many brackets, shallow, invalid
        b'{"a": "' + b"[" * 2000 + b'"',  # brackets in an unterminated string
    ],
)
def test_an_undecodable_body_within_the_decoders_depth_passes(raw: bytes) -> None:
    check_depth(raw, None, 8)
