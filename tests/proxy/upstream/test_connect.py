"""upstream/connect.py: which client `open_client` opens, that neither follows the proxy
environment variables (a proxy's upstream traffic must not detour through another proxy it
was never configured with), and that leaving the context closes what it opened."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from proxy.upstream.client import UpstreamRequest
from proxy.upstream.connect import open_client
from proxy.upstream.h1_client import H1Client
from proxy.upstream.httpx_client import HttpxClient
from tests.fakes.servers import HOST
from tests.proxy.upstream.scripted import ScriptedUpstream, read_all, req

pytestmark = pytest.mark.anyio

LATIN1 = ((b"x-title", b"caf\xe9"),)
"""A header that is not UTF-8: sent as its bytes."""
URL = "http://upstream.test/v1/models"


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch, dead_port: int) -> None:
    """Every proxy variable points at a port nobody answers on."""
    dead = f"http://{HOST}:{dead_port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


class Recording(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.urls: list[str] = []
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return httpx.Response(200, content=b"ok")

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.usefixtures("proxy_env")
async def test_a_given_transport_gets_every_request_and_closes_with_the_context() -> None:
    """Even with proxy variables set (httpx mounts none over an explicit transport today;
    this keeps it so)."""
    transport = Recording()
    async with open_client(transport) as client:
        assert isinstance(client, HttpxClient)
        response = await client.send(UpstreamRequest("GET", URL, (), b"", 5, 5))
        assert await read_all(response) == b"ok"
        await response.aclose()
        assert not transport.closed
    assert transport.urls == [URL]
    assert transport.closed  # closed with the context


@pytest.mark.usefixtures("proxy_env")
async def test_without_a_transport_both_clients_go_straight_to_the_upstream(
    upstream: ScriptedUpstream,
) -> None:
    async with open_client() as client:
        assert isinstance(client, H1Client)
        for url in (upstream.origin, upstream.origin.replace("//", "//user:pw@")):
            response = await client.send(
                replace(req(upstream, "/echo", headers=LATIN1), url=url + "/echo")
            )
            try:
                echoed = await read_all(response)
            finally:
                await response.aclose()
            assert response.status == 200
            assert echoed.startswith(b"GET /echo HTTP/1.1\r\n")  # not a proxy's absolute form
            assert b"x-title: caf\xe9" in echoed


async def test_leaving_the_context_closes_both_clients(upstream: ScriptedUpstream) -> None:
    async with open_client() as client:
        pass
    sent = req(upstream, "/echo")
    with_credentials = replace(sent, url=upstream.origin.replace("//", "//u:p@") + "/echo")
    for request in (sent, with_credentials):  # H1Client, then the fallback httpx client
        with pytest.raises(RuntimeError, match="closed"):
            await client.send(request)
