"""upstream/hygiene.py: the upstream URL of a `/v1/...` target, and which request and response
headers cross the proxy (hop-by-hop, Connection-named, control and override headers do not)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config.upstreams import UpstreamConfig
from proxy.upstream.hygiene import (
    DROPPED_PREFIXES,
    HOP_BY_HOP,
    OVERRIDES,
    REQUEST_DROPS,
    ResponseHead,
    request_headers,
    response_head,
    upstream_url,
)

BASE = "https://api.example.test/v1"
Pairs = list[tuple[bytes, bytes]]


# -- URL mapping -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "target", "query", "expected"),
    [
        (BASE, b"/v1/chat/completions", b"", f"{BASE}/chat/completions"),
        (BASE, b"/v1/", b"", f"{BASE}/"),
        (BASE, b"/v1/models", b"a=1&a=2", f"{BASE}/models?a=1&a=2"),
        ("http://10.0.0.2:8000", b"/v1/models", b"", "http://10.0.0.2:8000/models"),
        (
            "https://gw.test/openai/v1",
            b"/v1/files/f%2F1",
            b"",
            "https://gw.test/openai/v1/files/f%2F1",
        ),
        (BASE, b"/v1/models", b"q=caf\xe9", f"{BASE}/models?q=caf\u00e9"),  # latin-1, as raw
        (BASE, b"/v1/models", b"?", f"{BASE}/models??"),
    ],
)
def test_upstream_url_replaces_v1_by_the_base_url(
    base: str, target: bytes, query: bytes, expected: str
) -> None:
    assert upstream_url(base, target, query) == expected


# -- request headers ---------------------------------------------------------------------
def test_the_drop_sets_are_what_the_module_docstring_lists() -> None:
    assert sorted(HOP_BY_HOP) == [
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    ]
    assert sorted(OVERRIDES) == [
        b"x-http-method",
        b"x-http-method-override",
        b"x-method-override",
        b"x-original-url",
        b"x-rewrite-url",
    ]
    assert HOP_BY_HOP.issubset(REQUEST_DROPS)
    assert OVERRIDES.issubset(REQUEST_DROPS)
    assert sorted(REQUEST_DROPS - HOP_BY_HOP - OVERRIDES) == [
        b"content-length",
        b"expect",
        b"host",
    ]
    assert DROPPED_PREFIXES == (b"proxy-", b"x-curator-")


@pytest.mark.parametrize("name", sorted(REQUEST_DROPS))
def test_each_dropped_request_header_is_removed(name: bytes) -> None:
    headers = [(b"accept", b"*/*"), (name, b"value"), (b"content-type", b"application/json")]
    assert request_headers(headers, None) == [
        (b"accept", b"*/*"),
        (b"content-type", b"application/json"),
    ]


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        (b"proxy-authorization", False),
        (b"proxy-connection", False),
        (b"x-curator-policy", False),
        (b"x-curator-", False),
        (b"proxy", True),
        (b"x-curator", True),
        (b"x-curatorial", True),
        (b"x-proxy-id", True),
        (b"my-x-curator-thing", True),
    ],
)
def test_prefixed_request_headers_are_dropped_by_prefix_only(name: bytes, kept: bool) -> None:
    assert request_headers([(name, b"1")], None) == ([(name, b"1")] if kept else [])


def test_request_headers_keep_order_duplicates_and_values_byte_for_byte() -> None:
    headers = [
        (b"accept", b"text/event-stream"),
        (b"x-title", "Caf\u00e9".encode()),
        (b"accept", b"application/json"),
        (b"openai-beta", b"assistants=v2 "),
    ]
    assert request_headers(headers, None) == headers


def test_headers_the_connection_header_names_are_dropped() -> None:
    headers = [
        (b"connection", b"Keep-Alive,  X-Hop , x-other"),
        (b"x-hop", b"1"),
        (b"x-other", b"2"),
        (b"x-stay", b"3"),
    ]
    assert request_headers(headers, None) == [(b"x-stay", b"3")]


def test_every_connection_header_names_headers_to_drop() -> None:
    headers = [
        (b"connection", b"x-a"),
        (b"x-a", b"1"),
        (b"connection", b"x-b"),
        (b"x-b", b"2"),
        (b"x-c", b"3"),
    ]
    assert request_headers(headers, None) == [(b"x-c", b"3")]


@pytest.mark.parametrize("plain", [b"keep-alive", b"Keep-Alive", b"close", b"Close"])
def test_a_plain_connection_value_drops_nothing_else(plain: bytes) -> None:
    headers = [(b"connection", plain), (b"keep-alive", b"timeout=5"), (b"close", b"x")]
    assert request_headers(headers, None) == [(b"close", b"x")]


def test_connection_can_name_the_clients_authorization() -> None:
    headers = [(b"connection", b"authorization"), (b"authorization", b"Bearer sk-c")]
    assert request_headers(headers, None) == []


def test_an_api_key_replaces_every_client_authorization_at_the_end() -> None:
    headers = [
        (b"authorization", b"Bearer sk-client"),
        (b"accept", b"*/*"),
        (b"authorization", b"Basic dTpw"),
    ]
    assert request_headers(headers, b"Bearer sk-upstream") == [
        (b"accept", b"*/*"),
        (b"authorization", b"Bearer sk-upstream"),
    ]


def test_an_api_key_is_added_when_the_client_sent_none() -> None:
    key = UpstreamConfig("u", "https://h/v1", api_key="sk-\u00e9").authorization
    assert request_headers([], key) == [(b"authorization", b"Bearer sk-\xe9")]


@pytest.mark.parametrize("api_key", [None, ""])
def test_without_an_api_key_the_clients_authorization_passes(api_key: str | None) -> None:
    headers = [(b"authorization", b"Bearer sk-client")]
    authorization = UpstreamConfig("u", "https://h/v1", api_key=api_key).authorization
    assert request_headers(headers, authorization) == headers


def test_request_headers_do_not_change_their_input() -> None:
    headers = [(b"host", b"h"), (b"authorization", b"Bearer c"), (b"accept", b"*/*")]
    before = list(headers)
    request_headers(headers, b"Bearer sk")
    assert headers == before


names = st.sampled_from(
    [
        *sorted(REQUEST_DROPS - {b"connection"}),  # the one Connection header is the test's own
        *(b"accept", b"authorization", b"x-a", b"x-b", b"x-curator-mode", b"proxy-x", b"ua"),
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    headers=st.lists(st.tuples(names, st.binary(max_size=4)), max_size=12),
    named=st.lists(st.sampled_from([b"x-a", b"X-B", b"accept"]), max_size=3),
    api_key=st.none() | st.just(b"Bearer sk-up"),
)
def test_request_headers_pass_exactly_the_end_to_end_ones_in_order(
    headers: Pairs, named: list[bytes], api_key: bytes | None
) -> None:
    sent = [(b"connection", b", ".join(named)), *headers] if named else headers
    dropped = REQUEST_DROPS | {n.lower() for n in named if b"," not in n}
    if api_key:
        dropped |= {b"authorization"}
    expected = [(n, v) for n, v in sent if n not in dropped and not n.startswith(DROPPED_PREFIXES)]
    if api_key:
        expected.append((b"authorization", api_key))
    assert request_headers(sent, api_key) == expected


# -- response headers --------------------------------------------------------------------
def test_response_head_lower_cases_names_and_drops_hop_by_hop_ones() -> None:
    upstream = [
        (b"Date", b"Mon, 01 Jan 2026 00:00:00 GMT"),
        (b"TE", b"trailers"),
        (b"Trailer", b"x-sum"),
        (b"Trailers", b"x-sum"),
        (b"Upgrade", b"h2c"),
        (b"Proxy-Connection", b"close"),
        (b"X-Curator-Route", b"kept"),  # only requests lose the control headers
        (b"Set-Cookie", b"a=1"),
        (b"set-cookie", b"b=2"),
    ]
    assert response_head(upstream) == ResponseHead(
        [
            (b"date", b"Mon, 01 Jan 2026 00:00:00 GMT"),
            (b"x-curator-route", b"kept"),
            (b"set-cookie", b"a=1"),
            (b"set-cookie", b"b=2"),
        ],
        False,
        None,
    )


def test_response_head_drops_headers_the_connection_header_names() -> None:
    upstream = [
        (b"x-secret", b"1"),
        (b"Connection", b"close, X-Secret,x-Other"),
        (b"X-Other", b"2"),
        (b"x-public", b"3"),
    ]
    assert response_head(upstream).headers == [(b"x-public", b"3")]


def test_a_connection_header_naming_only_hop_by_hop_headers_drops_nothing_more() -> None:
    upstream = [(b"Connection", b"keep-alive, upgrade"), (b"x-a", b"1"), (b"close", b"2")]
    assert response_head(upstream).headers == [(b"x-a", b"1"), (b"close", b"2")]


@pytest.mark.parametrize(
    ("value", "event_stream"),
    [
        (b"text/event-stream", True),
        (b"text/event-stream; charset=utf-8", True),
        (b"TEXT/EVENT-STREAM", True),
        (b"application/json", False),
        (b"text/plain; x=text/event-stream", False),
        (b" text/event-stream", False),
    ],
)
def test_an_event_stream_is_told_by_its_content_type(value: bytes, event_stream: bool) -> None:
    head = response_head([(b"Content-Type", value)])
    assert head.event_stream is event_stream
    assert head.headers == [(b"content-type", value)]


def test_the_last_content_type_decides() -> None:
    both = [(b"content-type", b"text/event-stream"), (b"content-type", b"application/json")]
    assert response_head(both).event_stream is False
    assert response_head(list(reversed(both))).event_stream is True


def test_no_content_type_is_no_event_stream() -> None:
    assert response_head([]) == ResponseHead([], False, None)


@pytest.mark.parametrize(
    ("value", "length"),
    [
        (b"0", 0),
        (b"42", 42),
        (b"0042", 42),
        (b"18446744073709551616", 18446744073709551616),
        (b"", None),
        (b"-1", None),
        (b"+1", None),
        (b" 42", None),
        (b"42 ", None),
        (b"4.2", None),
        (b"42, 42", None),
        (b"\xd9\xa4", None),  # ARABIC-INDIC DIGIT FOUR in UTF-8: not an ASCII digit
    ],
)
def test_content_length_is_read_only_when_it_is_all_digits(
    value: bytes, length: int | None
) -> None:
    head = response_head([(b"Content-Length", value)])
    assert head.content_length == length
    assert head.headers == [(b"content-length", value)]  # relayed as sent either way
