"""Methods on real sockets: TRACE, CONNECT, WebDAV and extension methods get 405 in OpenAI's
shape with an `Allow` header and reach no upstream (TRACE would echo the injected upstream
key back); the methods OpenAI-compatible APIs use are forwarded as they are.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from proxy.serving.paths import ALLOWED_METHODS
from tests.fakes.raw_upstream import RawUpstream
from tests.hardening.raw_http import (
    RawResponse,
    connect,
    read_response,
    recv_until,
    request_head,
)
from tests.hardening.support import UPSTREAM_KEY, RunningProxy, running_proxy
from tests.hardening.test_paths import tenant_config

ALLOW = ", ".join(ALLOWED_METHODS)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningProxy, RawUpstream]]:
    with RawUpstream() as upstream, running_proxy(tenant_config(upstream.origin)) as proxy:
        yield proxy, upstream


@pytest.fixture
def setup(served: tuple[RunningProxy, RawUpstream]) -> tuple[RunningProxy, RawUpstream]:
    served[1].requests.clear()
    return served


def send(port: int, method: str, target: str) -> RawResponse:
    with connect(port) as sock:
        sock.sendall(request_head(method, target, {"content-length": "0"}, port=port))
        return read_response(sock)


def assert_405(response: RawResponse, allow: str) -> None:
    assert response.status == 405
    assert response.headers["allow"] == allow
    assert response.headers["content-type"] == "application/json"
    assert orjson.loads(response.body)["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "method", ["TRACE", "CONNECT", "PROPFIND", "MKCOL", "LOCK", "PURGE", "LINK", "SEARCH"]
)
def test_a_method_outside_the_api_is_a_405_and_never_forwarded(
    setup: tuple[RunningProxy, RawUpstream], method: str
) -> None:
    proxy, upstream = setup
    response = send(proxy.port, method, "/v1/models")
    assert_405(response, ALLOW)
    assert UPSTREAM_KEY.encode() not in response.body
    assert upstream.requests == []


def test_trace_with_a_client_credential_echoes_nothing(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    head = {"authorization": "Bearer sk-client-own", "content-length": "0"}
    with connect(proxy.port) as sock:
        sock.sendall(request_head("TRACE", "/v1/chat/completions", head, port=proxy.port))
        response = read_response(sock)
    assert_405(response, ALLOW)
    assert b"sk-" not in response.body
    assert upstream.requests == []


@pytest.mark.parametrize("method", ALLOWED_METHODS)
def test_the_api_methods_are_forwarded_as_they_are(
    setup: tuple[RunningProxy, RawUpstream], method: str
) -> None:
    proxy, upstream = setup
    with connect(proxy.port) as sock:
        sock.sendall(request_head(method, "/v1/files/file-1", port=proxy.port))
        head = recv_until(sock, b"\r\n\r\n")  # a HEAD answer has no body to wait for
    assert head.startswith(b"HTTP/1.1 200 ")
    assert [r.line for r in upstream.requests] == [
        f"{method} /tenant-a/v1/files/file-1 HTTP/1.1".encode()
    ]


def test_an_extension_method_the_parser_lets_through_is_a_405() -> None:
    # httptools refuses methods it does not know; h11 (uvicorn without httptools) passes
    # any token, so the proxy itself must refuse it.
    with RawUpstream() as upstream:
        config = tenant_config(upstream.origin)
        with running_proxy(config, http="h11") as proxy:
            response = send(proxy.port, "EXFILTRATE", "/v1/models")
        assert_405(response, ALLOW)
        assert upstream.requests == []


def test_a_method_outside_a_local_route_is_a_405_in_openai_shape(
    setup: tuple[RunningProxy, RawUpstream],
) -> None:
    proxy, upstream = setup
    for method in ("POST", "TRACE", "DELETE"):
        assert_405(send(proxy.port, method, "/healthz"), "GET, HEAD")
    assert upstream.requests == []
