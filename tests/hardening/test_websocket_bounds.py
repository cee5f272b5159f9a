"""WebSocket sessions over real sockets: no permessage-deflate either side (16 KB of deflate
from a client inflated to 16 MiB on the event loop, and was compressed again upstream), and
`server.max_ws_message_mb` bounds a message either way (1009 past it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from proxy.config.limits import Limits
from proxy.serving.server import uvicorn_options
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import RunningProxy, hardening_config, running_proxy

MB = 2**20
LIMITS = Limits(max_ws_message_mb=1)
REALTIME = "/v1/realtime?model=gpt-4o-realtime-preview"


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    options = uvicorn_options(LIMITS)
    ws = {key: options[key] for key in ("ws_max_size", "ws_per_message_deflate")}
    with running_proxy(hardening_config(fake.origin, limits=LIMITS), **ws) as running:
        yield running


def _session(proxy: RunningProxy) -> ClientConnection:
    # Deflate offered, as browsers and the websockets library do by default.
    url = f"ws://127.0.0.1:{proxy.port}{REALTIME}"
    ws = connect(url, compression="deflate", max_size=None, open_timeout=5)
    assert ws.recv(timeout=5) == '{"type": "session.created"}'
    return ws


def test_no_compression_is_negotiated_on_either_side(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    with _session(proxy) as ws:
        assert ws.protocol.extensions == []
        ws.send("x" * 1000)
        assert ws.recv(timeout=5) == "echo:" + "x" * 1000
    assert fake.last.header("sec-websocket-extensions") is None


def test_a_message_past_the_bound_ends_the_session_with_1009(proxy: RunningProxy) -> None:
    with _session(proxy) as ws:
        ws.send("x" * (MB - 100))  # within: relayed, and its echo too
        assert len(ws.recv(timeout=5)) == MB - 95
        ws.send("x" * (MB + 1))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009
