"""The admin listener on a real loopback port: metrics at its path, 404 and 405 elsewhere,
HEAD without a body, one request per connection, a silent client dropped."""

from __future__ import annotations

import asyncio

import pytest

from proxy.serving.admin import MAX_CONNECTIONS as CAP
from proxy.serving.admin import admin_listener

METRICS = b"# HELP curator_up 1\ncurator_up 1\n"


def render() -> tuple[bytes, str]:
    return METRICS, "text/plain; version=0.0.4"


async def ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()  # the listener closes after one answer
    writer.close()
    return answer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_metrics_at_the_path_and_nothing_else() -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", render) as server:
        port = server.sockets[0].getsockname()[1]
        ok = await ask(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        head = await ask(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        other = await ask(port, b"GET /v1/models HTTP/1.1\r\n\r\n")
        post = await ask(port, b"POST /metrics HTTP/1.1\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"connection: close" in ok
    assert ok.endswith(METRICS)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert head.endswith(b"\r\n\r\n")  # the length of the body, not the body
    assert f"content-length: {len(METRICS)}".encode() in head
    assert other.startswith(b"HTTP/1.1 404 Not Found")
    assert post.startswith(b"HTTP/1.1 405 Method Not Allowed")


@pytest.mark.anyio
async def test_without_metrics_every_path_is_404() -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", None) as server:
        port = server.sockets[0].getsockname()[1]
        answer = await ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404")


@pytest.mark.anyio
async def test_a_port_in_use_is_said_with_the_setting_that_chose_it() -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", render) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(OSError, match=f"metrics.port {port}: cannot listen on 127.0.0.1"):
            async with admin_listener("127.0.0.1", port, "/metrics", render):
                pass


async def _closed_by_the_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await reader.read() == b""
    except ConnectionError:  # reset: closed at once
        return True


@pytest.mark.anyio
async def test_past_the_cap_the_longest_waiting_connection_makes_room() -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", render) as server:
        port = server.sockets[0].getsockname()[1]
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3 * CAP)]
        answer = await ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        reads = [asyncio.ensure_future(_closed_by_the_server(r)) for r, _ in idle]
        # The rest wait for their heads (10 s): only the evicted ones end this soon.
        done, pending = await asyncio.wait(reads, timeout=1.0)
        for task in pending:
            task.cancel()
        for _, writer in idle:
            writer.close()
    assert answer.endswith(METRICS)  # the scrape got in during the flood
    assert sum(task.result() for task in done) == 2 * CAP + 1  # the scrape made room too
    assert len(pending) == CAP - 1
