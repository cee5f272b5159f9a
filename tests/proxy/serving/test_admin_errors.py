"""The admin listener answers every request it read, on a real loopback port: a head over
16 KiB gets 431 (read to its end, so the close does not reset the answer away), a client
too slow to send its head 408, and a bug 500 naming a request id the log names too."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from proxy.serving import admin
from proxy.serving.admin import MAX_HEAD_BYTES, admin_listener
from proxy.viewer.app import Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener
from tests.proxy.viewer.records import entries, write

METRICS = b"curator_up 1\n"


def render() -> tuple[bytes, str]:
    return METRICS, "text/plain; version=0.0.4"


def broken_render() -> tuple[bytes, str]:
    raise RuntimeError("a rendering bug")


async def ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the listener closes after one answer
    writer.close()
    return answer


def padded_head(target: str, size: int) -> bytes:
    """A GET whose head (request line to blank line) is `size` bytes."""
    start = f"GET {target} HTTP/1.1\r\nHost: a\r\nx-pad: ".encode()
    return start + b"p" * (size - len(start) - 4) + b"\r\n\r\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def viewer(tmp_path: Path) -> Viewer:
    db, _ = write(tmp_path, entries())
    return Viewer(opener(str(db)), AdminKeys(()))


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["/metrics", "/requests"])
async def test_a_head_over_16_kib_is_answered_431(viewer: Viewer, target: str) -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", render, viewer=viewer) as server:
        port = server.sockets[0].getsockname()[1]
        at_limit = await ask(port, padded_head(target, MAX_HEAD_BYTES))
        over = await ask(port, padded_head(target, MAX_HEAD_BYTES + 1))
        # Far over, sent whole before the listener reads: it must still be read to the end.
        huge = await ask(port, padded_head(target, 40 * MAX_HEAD_BYTES))
    assert at_limit.startswith(b"HTTP/1.1 200 OK\r\n")
    for answer in (over, huge):
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer
        assert answer.endswith(b"the request head is over 16 KiB\n")


@pytest.mark.anyio
async def test_a_client_too_slow_to_send_its_head_gets_408(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin, "READ_TIMEOUT_S", 0.2)
    async with admin_listener("127.0.0.1", 0, "/metrics", render) as server:
        port = server.sockets[0].getsockname()[1]
        answer = await ask(port, b"GET /metrics HTTP/1.1\r\n")  # no blank line: never ends
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")


@pytest.mark.anyio
async def test_a_bug_answers_500_with_the_request_id_the_log_names(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with admin_listener("127.0.0.1", 0, "/metrics", broken_render) as server:
        port = server.sockets[0].getsockname()[1]
        with caplog.at_level(logging.ERROR, logger="curator.admin"):
            answer = await ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        still = await ask(port, b"GET /other HTTP/1.1\r\n\r\n")  # the listener is still up
    assert answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    rid = re.search(rb"\r\nx-curator-request-id: ([0-9a-f]{32})\r\n", answer)
    assert rid is not None
    assert answer.endswith(b"request id " + rid[1] + b"\n")
    logged = [r for r in caplog.records if rid[1].decode() in r.getMessage()]
    assert logged
    assert logged[0].exc_info is not None  # the traceback is in the log
    assert still.startswith(b"HTTP/1.1 404")


@pytest.mark.anyio
async def test_a_viewer_bug_is_a_500_page_with_the_request_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> object:
        raise RuntimeError("a reader bug")

    viewer = Viewer(broken, AdminKeys(()))  # type: ignore[arg-type]
    async with admin_listener("127.0.0.1", 0, "/metrics", None, viewer=viewer) as server:
        port = server.sockets[0].getsockname()[1]
        with caplog.at_level(logging.ERROR, logger="curator.viewer"):
            answer = await ask(port, b"GET /requests HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert b"content-type: text/html" in answer
    rid = re.search(rb"\r\nx-curator-request-id: ([0-9a-f]{32})\r\n", answer)
    assert rid is not None
    assert b"<code>" + rid[1] + b"</code>" in answer
    assert any(rid[1].decode() in r.getMessage() and r.exc_info for r in caplog.records)
