from __future__ import annotations

import errno

import httpx
import pytest

from proxy.upstream.h1_client import UnsendableRequest
from proxy.upstream.h1_response import (
    BadResponse,
    ConnectFailed,
    ConnectionLost,
    ConnectTimeout,
    ReadTimeout,
)
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


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ConnectTimeout(f"http://h/?k={LEAK}"), "ConnectTimeout: connect timeout"),
        (ReadTimeout(LEAK), "ReadTimeout: read timeout"),
        (
            BadResponse(f"Bad status line b'{LEAK}'"),
            "BadResponse: malformed response status line, headers or body framing",
        ),
        (ConnectionLost(LEAK), "ConnectionLost: the upstream closed the connection"),
        (
            ConnectFailed(errno.ECONNREFUSED, LEAK),
            "ConnectFailed: cannot connect (ECONNREFUSED)",
        ),
        (UnsendableRequest(LEAK), "UnsendableRequest: request bytes HTTP does not allow"),
        (httpx.ConnectTimeout(LEAK), "ConnectTimeout: connect timeout"),
        (httpx.ReadTimeout(LEAK), "ReadTimeout: read timeout"),
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
