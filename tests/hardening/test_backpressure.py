"""A client that reads slowly from a fast upstream: ASGI send backpressure reaches the
upstream, so the proxy holds a bounded amount, not the whole stream.

uvicorn pauses the app's `send` while the client's socket is full; the relay then stops
reading, aiohttp stops reading its socket, and the upstream's own `send` blocks. The
firehose upstream counts what it managed to hand to its socket: that count stalls far
below the stream's size while the client is not reading, and the proxy's RSS stays flat.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from proxy.config.loader import UpstreamConfig
from tests.fakes.servers import HOST
from tests.hardening.raw_http import connect, drain_chunked, recv_until, request_head
from tests.hardening.support import (
    CHAT,
    WAIT_S,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    upstream_server,
)
from tests.hardening.upstreams import Firehose

TOTAL = 128 * 1024 * 1024
MIB = 1024 * 1024


@pytest.fixture
def firehose() -> Iterator[tuple[Firehose, int]]:
    app = Firehose(TOTAL)
    with upstream_server(app) as server:
        yield app, server.port


@pytest.fixture
def proxy(firehose: tuple[Firehose, int]) -> Iterator[RunningProxy]:
    _, port = firehose
    config = hardening_config("http://127.0.0.1:9")
    upstream = UpstreamConfig("fake", f"http://{HOST}:{port}/v1")
    with running_proxy(replace(config, upstreams={**config.upstreams, "fake": upstream})) as p:
        yield p


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _settled(read: Iterator[int]) -> int:
    """The value `read` yields once it stops changing (polled; bounded by WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    last, same = -1, 0
    for value in read:
        same = same + 1 if value == last else 0
        if same >= 5 or time.monotonic() > deadline:
            return value
        last = value
        time.sleep(0.1)
    raise AssertionError("unreachable")


def _poll(app: Firehose) -> Iterator[int]:
    while True:
        yield app.sent


def test_a_slow_reader_holds_the_upstream_back(
    proxy: RunningProxy, firehose: tuple[Firehose, int]
) -> None:
    app, _ = firehose
    body = chat_body(stream=True)
    head = {"content-type": "application/json", "content-length": str(len(body))}
    before = _rss()
    with connect(proxy.port, rcvbuf=64 * 1024) as sock:
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
        recv_until(sock, b"data: ")
        # The client now reads nothing: whatever the upstream gets rid of sits in buffers.
        stalled = _settled(_poll(app))
        grown = _rss() - before
        assert not app.done.is_set()
        assert stalled < TOTAL // 4, f"{stalled / MIB:.1f} MiB left the upstream"
        assert grown < TOTAL // 4, f"RSS grew {grown / MIB:.1f} MiB"
        rest = drain_chunked(sock)
    assert app.done.wait(WAIT_S)
    assert rest > TOTAL - stalled  # everything still arrives, once the client reads
