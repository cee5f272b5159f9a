from __future__ import annotations

import errno

import aiohttp
import httpx
import pytest
from yarl import URL

from proxy.upstream.safe_text import failure_reason, loggable_url

LEAK = "sk-proj-" + "Leak_" * 5


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"http://u:{LEAK}@h:81/v1/chat/completions?api-key={LEAK}#x",
            "http://h:81/v1/chat/completions",
        ),
        (f"https://h/v1/models?key={LEAK}", "https://h/v1/models"),
        ("http://[::1]:9/v1", "http://[::1]:9/v1"),
        ("http://h:bad/v1", "<invalid URL>"),
    ],
)
def test_loggable_url(url: str, shown: str) -> None:
    assert loggable_url(url) == shown


def _response_error() -> aiohttp.ClientResponseError:
    info = aiohttp.RequestInfo(URL(f"http://h/v1?key={LEAK}"), "POST", {}, URL("http://h/v1"))  # type: ignore[arg-type]
    return aiohttp.ClientResponseError(info, (), status=400, message=f"Bad status line b'{LEAK}'")


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (
            aiohttp.ConnectionTimeoutError(f"Connection timeout to host http://h/?k={LEAK}"),
            "ConnectionTimeoutError: connect timeout",
        ),
        (
            aiohttp.SocketTimeoutError(f"Timeout on reading data from socket {LEAK}"),
            "SocketTimeoutError: read timeout",
        ),
        (_response_error(), "ClientResponseError: malformed response status line or headers"),
        (
            aiohttp.ServerDisconnectedError(f"{LEAK}"),
            "ServerDisconnectedError: the upstream closed the connection",
        ),
        (
            ConnectionResetError(errno.ECONNRESET, LEAK),
            "ConnectionResetError: transport error (ECONNRESET)",
        ),
        (
            httpx.RemoteProtocolError(f"illegal header {LEAK}"),
            "RemoteProtocolError: HTTP protocol error",
        ),
        (httpx.ConnectError(f"http://h/?key={LEAK}"), "ConnectError: cannot connect"),
        (ValueError(LEAK), "ValueError: error"),
    ],
)
def test_failure_reason_never_quotes_the_message(exc: BaseException, reason: str) -> None:
    assert failure_reason(exc) == reason
