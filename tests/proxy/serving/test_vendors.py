"""Upstreams by vendor: a request for Anthropic's API goes only to an upstream of kind
`anthropic` (and OpenAI's only to `openai` ones), with the right credential header, and the
proxy's own errors on Anthropic's paths come in Anthropic's shape."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from policies.loader import load_preset
from proxy.config.auth import AuthConfig
from proxy.config.loader import Config, Route, RouteMatch, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app

OPENAI = UpstreamConfig("openai", "http://openai.test/v1")
CLAUDE = UpstreamConfig(
    "claude", "http://anthropic.test", api_key="sk-ant-upstream", kind="anthropic"
)
MESSAGES = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
ANTHROPIC_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "prompt-caching-2024-07-31",
}


def config(
    *upstreams: UpstreamConfig, routes: tuple[Route, ...] = (), keys: tuple[str, ...] = ()
) -> Config:
    policy = load_preset("passthrough")
    default = tuple(Route(u.name, u.name, "off") for u in upstreams)
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={u.name: u for u in upstreams},
        policies={"off": policy},
        routes=routes or default,
        auth=AuthConfig(keys=keys),
    )


class Upstreams:
    """The app over a MockTransport; every request the upstreams got is kept."""

    def __init__(self, cfg: Config) -> None:
        self.sent: list[httpx.Request] = []
        self.client = TestClient(create_app(cfg, httpx.MockTransport(self._answer)))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return httpx.Response(200, json={"ok": True, "host": request.url.host})

    def call(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Any:
        content = orjson.dumps(body) if body is not None else None
        with self.client as client:
            return client.request(method, path, content=content, headers=headers)


def test_messages_without_an_anthropic_upstream_get_an_anthropic_error_and_nothing_is_sent() -> (
    None
):
    proxy = Upstreams(config(OPENAI))
    headers = {"x-api-key": "sk-ant-client", **ANTHROPIC_HEADERS}
    response = proxy.call("POST", "/v1/messages", headers, MESSAGES)
    assert response.status_code == 404
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert "kind: anthropic" in body["error"]["message"]
    assert proxy.sent == []


def test_messages_go_to_the_anthropic_upstream_with_its_key_as_x_api_key() -> None:
    proxy = Upstreams(config(OPENAI, CLAUDE))
    headers = {"x-api-key": "sk-ant-client", "authorization": "Bearer other", **ANTHROPIC_HEADERS}
    response = proxy.call("POST", "/v1/messages", headers, MESSAGES)
    assert response.status_code == 200
    (sent,) = proxy.sent
    assert str(sent.url) == "http://anthropic.test/v1/messages"
    assert sent.headers.get_list("x-api-key") == ["sk-ant-upstream"]
    assert "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["anthropic-beta"] == "prompt-caching-2024-07-31"


@pytest.mark.parametrize(
    ("method", "path", "headers", "host"),
    [
        ("POST", "/v1/messages/count_tokens", ANTHROPIC_HEADERS, "anthropic.test"),
        ("GET", "/v1/models", ANTHROPIC_HEADERS, "anthropic.test"),
        ("GET", "/v1/models", {}, "openai.test"),
        ("POST", "/v1/chat/completions", {}, "openai.test"),
        ("POST", "/v1/responses", {}, "openai.test"),
    ],
)
def test_each_vendor_reaches_only_its_own_upstreams(
    method: str, path: str, headers: dict[str, str], host: str
) -> None:
    # The anthropic route comes second and has no match: first match among its vendor's.
    proxy = Upstreams(config(OPENAI, CLAUDE))
    body = MESSAGES if method == "POST" else None
    assert proxy.call(method, path, headers, body).status_code == 200
    (sent,) = proxy.sent
    assert sent.url.host == host


def test_the_clients_own_x_api_key_passes_when_the_upstream_has_none() -> None:
    keyless = UpstreamConfig("claude", "http://anthropic.test", kind="anthropic")
    proxy = Upstreams(config(keyless))
    headers = {"x-api-key": "sk-ant-client", **ANTHROPIC_HEADERS}
    assert proxy.call("POST", "/v1/messages", headers, MESSAGES).status_code == 200
    assert proxy.sent[0].headers["x-api-key"] == "sk-ant-client"


@pytest.mark.parametrize("header", ["x-api-key", "authorization", "api-key"])
def test_an_anthropic_key_never_reaches_an_openai_upstream(header: str) -> None:
    proxy = Upstreams(config(OPENAI))
    value = "Bearer sk-ant-client" if header == "authorization" else "sk-ant-client"
    assert proxy.call("POST", "/v1/chat/completions", {header: value}, {}).status_code == 200
    assert header not in proxy.sent[0].headers


def test_an_openai_key_passes_to_an_openai_upstream() -> None:
    proxy = Upstreams(config(OPENAI))
    headers = {"authorization": "Bearer sk-proj-client"}
    assert proxy.call("POST", "/v1/chat/completions", headers, {}).status_code == 200
    assert proxy.sent[0].headers["authorization"] == "Bearer sk-proj-client"


def test_a_proxy_key_may_come_as_x_api_key_and_stops_at_the_proxy() -> None:
    keyless = UpstreamConfig("claude", "http://anthropic.test", kind="anthropic")
    proxy = Upstreams(config(keyless, keys=("proxy-key-1",)))
    headers = {"x-api-key": "proxy-key-1", **ANTHROPIC_HEADERS}
    assert proxy.call("POST", "/v1/messages", headers, MESSAGES).status_code == 200
    assert "x-api-key" not in proxy.sent[0].headers


def test_a_wrong_proxy_key_on_messages_gets_an_anthropic_shaped_401() -> None:
    proxy = Upstreams(config(CLAUDE, keys=("proxy-key-1",)))
    headers = {"x-api-key": "wrong", **ANTHROPIC_HEADERS}
    response = proxy.call("POST", "/v1/messages", headers, MESSAGES)
    assert response.status_code == 401
    assert response.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": response.json()["error"]["message"]},
    }
    assert proxy.sent == []


def test_an_openai_request_with_only_an_anthropic_route_gets_openais_no_route() -> None:
    proxy = Upstreams(config(CLAUDE))
    response = proxy.call("POST", "/v1/chat/completions", {}, {})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_route"
    assert proxy.sent == []


def test_a_catch_all_openai_route_first_does_not_take_anthropic_requests() -> None:
    routes = (
        Route("all", "openai", "off"),
        Route("claude", "claude", "off", match=RouteMatch(model="claude-*")),
    )
    proxy = Upstreams(config(OPENAI, CLAUDE, routes=routes))
    assert proxy.call("POST", "/v1/messages", ANTHROPIC_HEADERS, MESSAGES).status_code == 200
    assert proxy.sent[0].url.host == "anthropic.test"
