"""Path safety on real sockets: only paths in normal form are forwarded, exactly as sent and
always under the upstream's base path; anything else is 400 `invalid_path` and reaches no
upstream. Unknown paths get OpenAI's error shape.

The upstream records the raw request line (tests/fakes/raw_upstream.py), so what it sees
is what a server behind the proxy would route, before any library decodes it. Requests
go out on raw sockets: a client library would normalize most of these paths itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from unicodedata import normalize
from urllib.parse import unquote

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.policy import Policy
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.paths import path_problem
from tests.fakes.raw_upstream import RawUpstream
from tests.hardening.raw_http import RawResponse, connect, read_response, request_head
from tests.hardening.support import UPSTREAM_KEY, RunningProxy, chat_body, running_proxy

BASE_PATH = "/tenant-a/v1"
"""The keyed upstream's base path: nothing may reach anything outside it."""


def tenant_config(origin: str) -> Config:
    budget = Policy("budget", Chain((TokenBudget(),)))
    upstream = UpstreamConfig("tenant-a", origin + BASE_PATH, api_key=UPSTREAM_KEY)
    return Config(
        source="<paths>",
        server=ServerConfig(),
        upstreams={"tenant-a": upstream},
        policies={"budget": budget},
        routes=(Route("default", "tenant-a", "budget"),),
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningProxy, RawUpstream]]:
    with RawUpstream() as upstream, running_proxy(tenant_config(upstream.origin)) as proxy:
        yield proxy, upstream


@pytest.fixture
def setup(served: tuple[RunningProxy, RawUpstream]) -> tuple[RunningProxy, RawUpstream]:
    proxy, upstream = served
    upstream.requests.clear()
    proxy.records.clear()
    return proxy, upstream


def send(proxy: RunningProxy, method: str, target: str, body: bytes = b"") -> RawResponse:
    head = {"content-type": "application/json", "content-length": str(len(body))} if body else {}
    with connect(proxy.port) as sock:
        sock.sendall(request_head(method, target, head, port=proxy.port) + body)
        return read_response(sock)


def error_code(response: RawResponse) -> str:
    assert response.headers["content-type"] == "application/json"
    error = orjson.loads(response.body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    code: str = error["code"]
    return code


# -- what is forwarded, and how ----------------------------------------------------------
def test_a_normal_path_and_its_query_reach_the_base_path_byte_for_byte(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    query = '?limit=2&q=%2e%2e/|"&p=..%2f'
    response = send(proxy, "GET", "/v1/files/a%20b%C3%A9%3A" + query)
    assert response.status == 200
    (seen,) = upstream.requests
    assert seen.line == b"GET /tenant-a/v1/files/a%20b%C3%A9%3A" + query.encode() + b" HTTP/1.1"
    assert seen.header(b"authorization") == f"Bearer {UPSTREAM_KEY}".encode()


def test_chat_completions_are_curated_on_the_path_that_is_forwarded(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    response = send(proxy, "POST", "/v1/chat/completions", chat_body())
    assert response.status == 200
    assert "x-curator-tokens-before" in response.headers
    assert [r.line for r in upstream.requests] == [b"POST /tenant-a/v1/chat/completions HTTP/1.1"]


# -- what is refused -----------------------------------------------------------------------
TENANT_ESCAPES = [
    "/v1/../../tenant-b/v1/models",
    "/v1/%2e%2e/%2e%2e/tenant-b/v1/models",
    "/v1/%2E%2E/%2E%2E/tenant-b/v1/models",
    "/v1/.%2e/.%2E/tenant-b/v1/models",
    "/v1/..%2f..%2ftenant-b/v1/models",
    "/v1/..%2F..%2Ftenant-b/v1/models",
    "/v1%2f..%2f..%2ftenant-b/v1/models",
    "/v1/..%5c..%5ctenant-b/v1/models",
    "/v1/..%5C..%5Ctenant-b/v1/models",
    "/v1/..\\..\\tenant-b/v1/models",
    "/v1/..;/..;/tenant-b/v1/models",
    "/v1/%252e%252e/%252e%252e/tenant-b/v1/models",
    "/v1/models/..",
    "/v1/.../.../tenant-b/v1/models",
    "/v1/%C0%AE%C0%AE/%C0%AE%C0%AE/tenant-b/v1/models",
    "/v1/%EF%BC%8E%EF%BC%8E/%EF%BC%8E%EF%BC%8E/tenant-b/v1/models",
    "/v1/..%EF%BC%8F..%EF%BC%8Ftenant-b/v1/models",
]
CURATION_BYPASSES = [
    "/v1//chat/completions",
    "/v1/chat//completions",
    "/v1/chat/./completions",
    "/v1/./chat/completions",
    "/v1/x/../chat/completions",
    "/v1/chat/completions/",
    "/v1/chat%2fcompletions",
    "/v1/chat%2Fcompletions",
    "/v1/%63hat/completions",
    "/v1/chat/completions;x",
    "/v1/chat/completions%3b",
    "/v1/chat/completions%00",
    "/v1/chat/completions%zz",
    "/v1/chat/completions%",
    "/v1/",
]


@pytest.mark.parametrize("target", TENANT_ESCAPES)
def test_a_path_leaving_the_base_path_is_refused_and_never_forwarded(
    setup: tuple[RunningProxy, RawUpstream], target: str
) -> None:
    proxy, upstream = setup
    response = send(proxy, "GET", target)
    assert response.status == 400
    assert error_code(response) == "invalid_path"
    assert upstream.requests == []


@pytest.mark.parametrize("target", CURATION_BYPASSES)
def test_a_path_not_in_normal_form_is_refused_and_recorded(
    setup: tuple[RunningProxy, RawUpstream], target: str
) -> None:
    proxy, upstream = setup
    response = send(proxy, "POST", target, chat_body())
    assert response.status == 400
    assert error_code(response) == "invalid_path"
    assert "x-curator-request-id" in response.headers
    assert upstream.requests == []
    (record,) = proxy.wait_records(1)
    assert (record.status, record.error, record.upstream) == (400, "invalid_path", None)


def test_the_refusal_names_no_path_and_the_connection_stays_usable(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    with connect(proxy.port) as sock:
        body = chat_body("first")
        head = {"content-type": "application/json", "content-length": str(len(body))}
        sock.sendall(request_head("POST", "/v1/x/../secret-name", head) + body)
        refused = read_response(sock)
        sock.sendall(request_head("GET", "/v1/models"))
        after = read_response(sock)
    assert refused.status == 400
    assert b"secret-name" not in refused.body
    assert after.status == 200
    assert [r.line for r in upstream.requests] == [b"GET /tenant-a/v1/models HTTP/1.1"]


def test_headers_that_override_the_path_or_method_are_not_forwarded(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    overrides = {
        "X-Original-URL": "/tenant-b/v1/models",
        "X-Rewrite-URL": "/tenant-b/v1/models",
        "X-HTTP-Method-Override": "DELETE",
        "X-HTTP-Method": "TRACE",
        "X-Method-Override": "PUT",
    }
    with connect(proxy.port) as sock:
        sock.sendall(request_head("GET", "/v1/models", {**overrides, "X-Kept": "1"}))
        assert read_response(sock).status == 200
    (seen,) = upstream.requests
    names = {name.lower() for name, _ in seen.headers}
    assert b"x-kept" in names
    assert names.isdisjoint(name.lower().encode() for name in overrides)


# -- unknown paths ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "target",
    [
        "/chat/completions",  # a base_url without /v1
        "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",  # Azure's
        "/v1",
        "/V1/chat/completions",
        "//v1/chat/completions",
    ],
)
def test_an_unknown_path_is_a_404_in_openai_shape(
    setup: tuple[RunningProxy, RawUpstream], target: str
) -> None:
    proxy, upstream = setup
    response = send(proxy, "POST", target, chat_body())
    assert response.status == 404
    assert error_code(response) == "unknown_path"
    message = orjson.loads(response.body)["error"]["message"]
    assert "/v1/*" in message
    assert "/healthz" in message
    assert upstream.requests == []


# -- the normalizer, as a property ---------------------------------------------------------
PIECES = st.sampled_from(
    [
        *("a", "v1", "models", ".", "..", "-", "~", "@", ":", ";", "\\", "/", "|", "%"),
        *("%2e", "%2E", "%2f", "%2F", "%5c", "%25", "%41", "%3b", "%g1", "%20", "%C3%A9"),
        *("%C0%AE", "%EF%BC%8E", "%EF%BC%8F", "%E9"),
    ]
)
SEGMENTS = st.lists(PIECES, min_size=1, max_size=3).map("".join)
RAW_PATHS = st.lists(SEGMENTS, min_size=1, max_size=5).map(lambda s: "/v1/" + "/".join(s))


def lenient(path: str) -> str:
    """What the most liberal server might route: decoded twice and NFKC-normalized, '\\'
    read as '/', ';params' dropped, empty segments merged and dot segments ('...' as '..')
    resolved."""
    decoded = normalize("NFKC", unquote(unquote(path))).replace("\\", "/")
    segments: list[str] = []
    for segment in decoded.split("/"):
        segment = segment.split(";", 1)[0]
        if segment in ("", "."):
            continue
        if segment.strip("."):
            segments.append(segment)
        else:
            segments = segments[:-1]
    return "/" + "/".join(segments)


@settings(max_examples=500)
@given(RAW_PATHS)
def test_an_accepted_path_means_the_same_to_every_server(raw: str) -> None:
    if path_problem(raw.encode()) is not None:
        return
    forwarded = BASE_PATH + raw[3:]
    assert lenient(forwarded) == unquote(forwarded)  # what we routed is what they route
    assert lenient(forwarded).startswith(BASE_PATH + "/")


@settings(max_examples=150)
@given(RAW_PATHS)
def test_only_accepted_paths_are_sent_and_exactly_as_accepted(
    served: tuple[RunningProxy, RawUpstream], raw: str
) -> None:
    proxy, upstream = served
    before = len(upstream.requests)
    response = send(proxy, "GET", raw)
    sent = upstream.requests[before:]
    if path_problem(raw.encode()) is None:
        assert response.status == 200
        assert [r.target for r in sent] == [(BASE_PATH + raw[3:]).encode()]
    else:
        assert response.status == 400  # from the proxy, or from the HTTP parser before it
        assert sent == []
