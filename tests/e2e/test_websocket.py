"""WebSocket sessions under /v1/ (Realtime, Responses WebSocket mode) through the proxy on
real sockets: relayed message for message both ways, with the subprotocol, the close codes
and the upstream's refusals passed on, and the proxy's own refusals OpenAI-shaped."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import orjson
import pytest
from openai import OpenAI
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from proxy.config.auth import AuthConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.e2e.conftest import UPSTREAM_KEY, e2e_config
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

REALTIME = "/v1/realtime?model=gpt-4o-realtime-preview"
CLIENT_KEY = "sk-client-e2e"
PROXY_KEY = "sk-proxy-e2e"


def ws_origin(origin: str) -> str:
    return "ws" + origin[4:]


def session(origin: str, path: str = REALTIME, **headers: str) -> ClientConnection:
    sent = {"Authorization": f"Bearer {CLIENT_KEY}", **headers}
    return connect(
        ws_origin(origin) + path,
        additional_headers=sent,
        subprotocols=["realtime", "openai-beta.realtime-v1"],  # type: ignore[list-item]
        open_timeout=5,
    )


def test_messages_are_relayed_both_ways(proxy_origin: str, fake: FakeOpenAI) -> None:
    with session(proxy_origin, **{"OpenAI-Beta": "realtime=v1"}) as ws:
        assert ws.subprotocol == "realtime"  # the upstream's choice
        assert orjson.loads(ws.recv(timeout=5)) == {"type": "session.created"}
        ws.send('{"type": "response.create"}')
        assert ws.recv(timeout=5) == 'echo:{"type": "response.create"}'
        ws.send(b"\x00\x01\x02audio")
        assert ws.recv(timeout=5) == b"oidua\x02\x01\x00"
    handshake = fake.last
    assert handshake.method == "WEBSOCKET"
    assert handshake.path == "/v1/realtime"
    assert handshake.query == b"model=gpt-4o-realtime-preview"
    assert handshake.header("authorization") == f"Bearer {CLIENT_KEY}"
    assert handshake.header("openai-beta") == "realtime=v1"
    assert handshake.header("sec-websocket-protocol") == "realtime, openai-beta.realtime-v1"


@pytest.mark.usefixtures("fake")
def test_the_upstream_close_code_reaches_the_client(proxy_origin: str) -> None:
    with session(proxy_origin) as ws:
        ws.recv(timeout=5)
        ws.send("close")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "bye")


def test_the_client_close_code_reaches_the_upstream(proxy_origin: str, fake: FakeOpenAI) -> None:
    with session(proxy_origin) as ws:
        ws.recv(timeout=5)
        ws.close(4002, "done")
    deadline = time.monotonic() + 5
    while not fake.ws_closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.ws_closed == [4002]


@pytest.mark.usefixtures("fake")
def test_an_upstream_refusal_is_relayed(proxy_origin: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        session(proxy_origin, "/v1/realtime?deny=1")
    response = refused.value.response
    assert response.status_code == 403
    assert orjson.loads(response.body or b"")["error"]["code"] == "forbidden"


def test_a_configured_upstream_key_replaces_the_client_key(
    proxy_origin: str, fake: FakeOpenAI
) -> None:
    with session(proxy_origin, **{"x-e2e-route": "keyed"}) as ws:
        ws.recv(timeout=5)
    assert fake.last.header("authorization") == f"Bearer {UPSTREAM_KEY}"


@pytest.mark.usefixtures("fake")
def test_an_unreachable_upstream_is_a_502_without_its_address(proxy_origin: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        session(proxy_origin, **{"x-e2e-route": "dead"})
    response = refused.value.response
    assert response.status_code == 502
    body = response.body or b""
    assert orjson.loads(body)["error"]["code"] == "upstream_unreachable"
    assert b"127.0.0.1" not in body
    assert UPSTREAM_KEY.encode() not in body


def test_a_bad_path_is_refused_before_the_upstream(proxy_origin: str, fake: FakeOpenAI) -> None:
    with pytest.raises(InvalidStatus) as refused:
        session(proxy_origin, "/v1/%2e%2e/admin")
    assert refused.value.response.status_code == 400
    assert fake.requests == []


@pytest.fixture(scope="module")
def keyed_proxy(fake_server: FakeOpenAI, dead_port: int) -> Iterator[str]:
    config = dataclasses.replace(
        e2e_config(fake_server.origin, dead_port), auth=AuthConfig(keys=(PROXY_KEY,))
    )
    options = {**uvicorn_options(), "log_level": "warning"}
    with ServerThread(create_app(config), **options) as server:
        yield server.origin


def test_a_proxy_key_is_required_and_never_forwarded(keyed_proxy: str, fake: FakeOpenAI) -> None:
    with pytest.raises(InvalidStatus) as refused:
        session(keyed_proxy)
    assert refused.value.response.status_code == 401
    assert orjson.loads(refused.value.response.body or b"")["error"]["code"] == "invalid_proxy_key"
    assert fake.requests == []
    with session(keyed_proxy, Authorization=f"Bearer {PROXY_KEY}") as ws:
        assert orjson.loads(ws.recv(timeout=5)) == {"type": "session.created"}
    assert fake.last.header("authorization") is None


def test_the_openai_sdk_realtime_client_works_through_the_proxy(
    proxy_origin: str, fake: FakeOpenAI
) -> None:
    client = OpenAI(base_url=proxy_origin + "/v1", api_key=CLIENT_KEY, max_retries=0)
    with client.realtime.connect(model="gpt-realtime") as connection:
        assert orjson.loads(connection.recv_bytes()) == {"type": "session.created"}
        connection.send({"type": "session.update", "session": {"type": "realtime"}})
        echoed = connection.recv_bytes()
    assert echoed.startswith(b'echo:{"type": "session.update"')
    assert fake.last.path == "/v1/realtime"
    assert fake.last.query == b"model=gpt-realtime"
    client.close()
