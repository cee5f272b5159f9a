"""The proxy's own refusals of a WebSocket session, before any upstream is opened: each an
OpenAI-shaped HTTP response to the handshake (the relay itself runs on real sockets in
tests/e2e/test_websocket.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import orjson
import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from proxy.config.auth import AuthConfig
from proxy.config.loader import Route, RouteMatch, UpstreamConfig
from proxy.serving.app import create_app
from tests.proxy.serving.test_app import make_config

KEY = "sk-proxy-unit"


@pytest.fixture
def client(dead_port: int) -> Iterator[TestClient]:
    config = make_config(
        routes=(Route("realtime", "dead", "off", RouteMatch(path="/v1/realtime")),)
    )
    dead = UpstreamConfig("dead", f"http://127.0.0.1:{dead_port}/v1", connect_timeout_s=2)
    config = dataclasses.replace(
        config, upstreams={**config.upstreams, "dead": dead}, auth=AuthConfig(keys=(KEY,))
    )
    with TestClient(create_app(config)) as c:
        yield c


def refusal(client: TestClient, path: str, key: str | None = KEY) -> tuple[int, str]:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect(path, headers=headers),
    ):
        pass
    response = denied.value
    return response.status_code, orjson.loads(response.content)["error"]["code"]


def test_a_missing_proxy_key_is_a_401(client: TestClient) -> None:
    assert refusal(client, "/v1/realtime", key=None) == (401, "invalid_proxy_key")
    assert refusal(client, "/v1/realtime", key="sk-wrong") == (401, "invalid_proxy_key")


def test_a_path_no_route_matches_is_a_404(client: TestClient) -> None:
    assert refusal(client, "/v1/elsewhere") == (404, "no_route")


def test_an_upstream_that_cannot_be_reached_is_a_502(client: TestClient) -> None:
    assert refusal(client, "/v1/realtime?model=gpt-realtime") == (502, "upstream_unreachable")
