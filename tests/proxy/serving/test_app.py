"""app.py: /healthz, transparent forwarding of /v1/*, proxy errors and exchange records."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Callable, Iterator

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from policies.policy import Policy
from proxy.config.loader import (
    Config,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
)
from proxy.observability.exchange import ExchangeRecord, Observer
from proxy.serving.app import create_app
from proxy.types import Message, Receive, Scope, Send

BASE = "https://upstream.internal:8443/v1"
Handler = Callable[[httpx.Request], httpx.Response]


def make_config(api_key: str | None = None, routes: tuple[Route, ...] | None = None) -> Config:
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={
            "main": UpstreamConfig("main", BASE, api_key=api_key),
            "other": UpstreamConfig("other", "http://other.internal/v1"),
        },
        policies={"off": Policy("off")},
        routes=routes or (Route("default", "main", "off"),),
    )


class Upstream:
    """An httpx.MockTransport that records requests and answers with `handler`."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.handler = handler or (lambda _: httpx.Response(200, json={"ok": True}))
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


def client_for(
    upstream: Upstream, config: Config | None = None, observers: tuple[Observer, ...] = ()
) -> TestClient:
    app = create_app(config or make_config(), upstream.transport, observers=observers)
    return TestClient(app, follow_redirects=False)


@pytest.fixture
def client(upstream: Upstream) -> Iterator[TestClient]:
    with client_for(upstream) as c:
        yield c


def test_healthz(client: TestClient, upstream: Upstream) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert upstream.requests == []


def test_non_chat_paths_forward_method_path_query_and_body(
    client: TestClient, upstream: Upstream
) -> None:
    client.get("/v1/models?x=1&y=a%20b")
    client.post("/v1/embeddings", content=b'{"model":"e","input":"hi"}')
    client.delete("/v1/files/file-1")
    get, post, delete = upstream.requests
    assert (get.method, str(get.url)) == ("GET", f"{BASE}/models?x=1&y=a%20b")
    assert (post.method, str(post.url)) == ("POST", f"{BASE}/embeddings")
    assert post.content == b'{"model":"e","input":"hi"}'
    assert (delete.method, str(delete.url)) == ("DELETE", f"{BASE}/files/file-1")


def test_request_headers_are_cleaned_and_host_rewritten(
    client: TestClient, upstream: Upstream
) -> None:
    client.get(
        "/v1/models",
        headers={
            "Connection": "keep-alive, x-secret-hop",
            "x-secret-hop": "1",
            "Keep-Alive": "timeout=5",
            "Proxy-Authorization": "Basic abc",
            "x-curator-policy": "off",
            "Authorization": "Bearer sk-client",
            "OpenAI-Organization": "org-1",
        },
    )
    sent = upstream.requests[0].headers
    assert sent["host"] == "upstream.internal:8443"
    assert sent["authorization"] == "Bearer sk-client"
    assert sent["openai-organization"] == "org-1"
    for name in ("connection", "x-secret-hop", "keep-alive", "proxy-authorization"):
        assert name not in sent
    assert not [n for n in sent if n.startswith("x-curator-")]


def test_configured_api_key_replaces_authorization(upstream: Upstream) -> None:
    with client_for(upstream, make_config(api_key="sk-upstream")) as client:
        client.get("/v1/models", headers={"Authorization": "Bearer sk-client"})
    assert upstream.requests[0].headers.get_list("authorization") == ["Bearer sk-upstream"]


def test_responses_come_back_unchanged_plus_a_request_id() -> None:
    body = b'{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}'
    upstream = Upstream(
        lambda _: httpx.Response(
            429,
            content=body,
            headers={
                "content-type": "application/json",
                "retry-after": "7",
                "Connection": "x-internal",
                "x-internal": "hop",
                "keep-alive": "timeout=5",
            },
        )
    )
    with client_for(upstream) as client:
        response = client.get("/v1/models")
    assert response.status_code == 429
    assert response.content == body
    assert response.headers["retry-after"] == "7"
    assert "x-internal" not in response.headers
    assert "keep-alive" not in response.headers
    assert len(response.headers["x-curator-request-id"]) == 32


def test_gzip_bodies_pass_through_byte_identical() -> None:
    packed = gzip.compress(b'{"object": "list", "data": []}')
    upstream = Upstream(
        lambda _: httpx.Response(
            200,
            content=packed,
            headers={"content-encoding": "gzip", "content-type": "application/json"},
        )
    )
    with client_for(upstream) as client, client.stream("GET", "/v1/models") as response:
        raw = b"".join(response.iter_raw())
    assert raw == packed
    assert response.headers["content-encoding"] == "gzip"


def test_redirects_are_relayed_not_followed() -> None:
    upstream = Upstream(lambda _: httpx.Response(307, headers={"location": f"{BASE}/elsewhere"}))
    with client_for(upstream) as client:
        response = client.get("/v1/models")
    assert response.status_code == 307
    assert response.headers["location"] == f"{BASE}/elsewhere"
    assert len(upstream.requests) == 1


def _raise(exc: Exception) -> Handler:
    def handler(_request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (
            httpx.ConnectError("[Errno 111] upstream.internal:8443 refused"),
            502,
            "upstream_unreachable",
        ),
        (httpx.ReadTimeout("timed out reading upstream.internal"), 504, "upstream_timeout"),
        (httpx.RemoteProtocolError("upstream.internal sent garbage"), 502, "upstream_error"),
    ],
)
def test_upstream_failures_answer_openai_shaped_errors_without_leaking(
    exc: Exception, status: int, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = Upstream(_raise(exc))
    with client_for(upstream, make_config(api_key="sk-secret-upstream")) as client:
        response = client.post("/v1/embeddings", content=b"{}")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "param", "code"}
    for secret in ("upstream.internal", "8443", "sk-secret", "Traceback"):
        assert secret not in response.text
    assert response.headers["x-curator-request-id"]
    assert any(code in r.getMessage() for r in caplog.records)


def test_no_matching_route_is_a_404_in_openai_shape(upstream: Upstream) -> None:
    routes = (Route("chat-only", "main", "off", RouteMatch(path="/v1/chat/*")),)
    with client_for(upstream, make_config(routes=routes)) as client:
        response = client.get("/v1/models")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_route"
    assert upstream.requests == []


def test_routes_pick_the_upstream_by_model_for_non_chat_paths(upstream: Upstream) -> None:
    routes = (
        Route("llama", "other", "off", RouteMatch(model="llama*")),
        Route("default", "main", "off"),
    )
    with client_for(upstream, make_config(routes=routes)) as client:
        client.post("/v1/embeddings", content=b'{"model": "llama-embed", "input": "x"}')
        client.post("/v1/embeddings", content=b'{"model": "text-embedding-3", "input": "x"}')
    assert [r.url.host for r in upstream.requests] == ["other.internal", "upstream.internal"]


def test_bodies_over_the_limit_get_413(upstream: Upstream) -> None:
    app = create_app(make_config(), upstream.transport, max_body_bytes=100)
    with TestClient(app) as client:
        response = client.post("/v1/embeddings", content=b"x" * 101)
        assert client.post("/v1/embeddings", content=b"x" * 100).status_code == 200
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert len(upstream.requests) == 1


def test_observers_get_one_record_per_exchange(upstream: Upstream) -> None:
    records: list[ExchangeRecord] = []
    with client_for(upstream, observers=(records.append,)) as client:
        response = client.get("/v1/models?x=1")
    (record,) = records
    assert record.id == response.headers["x-curator-request-id"]
    assert (record.method, record.path, record.route, record.upstream) == (
        "GET",
        "/v1/models",
        "default",
        "main",
    )
    assert (record.status, record.upstream_status, record.outcome) == (200, 200, "ok")
    assert record.latency_s >= 0
    assert record.ttfb_s is not None
    assert record.skip_reason is None
    assert record.original is None


def test_the_record_knows_the_request_body_size_as_sent(upstream: Upstream) -> None:
    records: list[ExchangeRecord] = []
    with client_for(upstream, observers=(records.append,)) as client:
        client.post("/v1/embeddings", content=b"x" * 37)
        client.get("/v1/models")
    assert [r.request_bytes for r in records] == [37, 0]
    assert records[0].small()  # nothing of the response kept: no audit here


def test_a_failing_observer_is_logged_and_does_not_affect_others(
    upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_record: ExchangeRecord) -> None:
        raise RuntimeError("metrics bug")

    records: list[ExchangeRecord] = []
    with client_for(upstream, observers=(broken, records.append)) as client:
        response = client.get("/v1/models")
    assert response.status_code == 200
    assert len(records) == 1
    failures = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert len(failures) == 1


def test_proxy_errors_are_recorded_with_their_code() -> None:
    records: list[ExchangeRecord] = []
    upstream = Upstream(_raise(httpx.ConnectError("refused")))
    with client_for(upstream, observers=(records.append,)) as client:
        client.get("/v1/models")
    (record,) = records
    assert (record.status, record.outcome, record.error) == (
        502,
        "upstream_error",
        "upstream_unreachable",
    )
    assert record.upstream_status is None


def test_error_bodies_are_valid_json_with_length() -> None:
    upstream = Upstream(_raise(httpx.ConnectError("refused")))
    with client_for(upstream) as client:
        response = client.get("/v1/models")
    assert int(response.headers["content-length"]) == len(response.content)
    assert orjson.loads(response.content)["error"]["type"] == "upstream_error"


def test_headers_a_server_adds_after_the_head_are_never_read(upstream: Upstream) -> None:
    routes = (
        Route("other", "other", "off", RouteMatch(headers=(("x-route", "other"),))),
        Route("default", "main", "off"),
    )
    app = create_app(make_config(routes=routes), transport=upstream.transport)

    async def appending_trailers(scope: Scope, receive: Receive, send: Send) -> None:
        """As uvicorn's parsers do: trailers go into the list the scope was handed."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = scope["headers"]

        async def body_then_trailers() -> Message:
            message = await receive()
            headers.extend([(b"x-route", b"other"), (b"authorization", b"Bearer late")])
            return message

        await app(scope, body_then_trailers, send)

    with TestClient(appending_trailers) as client:
        response = client.post("/v1/embeddings", content=b'{"model": "m"}')
    assert response.status_code == 200
    sent = upstream.requests[0]
    assert sent.url.host == "upstream.internal"
    assert "x-route" not in sent.headers
    assert "authorization" not in sent.headers
