"""Per-connection limits for one worker: `max_connections` sized from the open-file limit,
raising that limit, the fd budget warning, and the raw HTTP answers of the connection guard."""

from __future__ import annotations

import logging
import resource
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config.limits import MAX_CONNECTIONS_CAP, Limits
from proxy.errors import ProxyError
from proxy.serving import conn_limits as cl
from proxy.serving.conn_limits import (
    FDS_PER_CONNECTION,
    RESERVED_FDS,
    ConnLimits,
    check_fd_budget,
    closing_response,
    conn_limits,
    connection_limit,
    raise_fd_limit,
    request_header_too_large,
    request_timeout,
    too_many_connections,
)

INF = resource.RLIM_INFINITY
LOGGER = "curator.server"


def nofile(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> None:
    def getrlimit(which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return soft, hard

    monkeypatch.setattr(resource, "getrlimit", getrlimit)


def setrlimit_records(
    monkeypatch: pytest.MonkeyPatch, error: Exception | None = None
) -> list[tuple[int, tuple[int, int]]]:
    """Never the real one: raising this process's limit would outlive the test."""
    calls: list[tuple[int, tuple[int, int]]] = []

    def setrlimit(which: int, limits: tuple[int, int]) -> None:
        calls.append((which, limits))
        if error is not None:
            raise error

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    return calls


def split(raw: bytes) -> tuple[list[bytes], bytes]:
    head, body = raw.split(b"\r\n\r\n", 1)
    return head.split(b"\r\n"), body


# -- sizing max_connections ---------------------------------------------------------------


def test_the_defaults_are_what_a_1024_soft_limit_carries() -> None:
    limits = ConnLimits()
    assert limits == ConnLimits(65536, 10.0, 30.0, 448)
    assert limits.max_connections == (1024 - RESERVED_FDS) // FDS_PER_CONNECTION
    assert (RESERVED_FDS, FDS_PER_CONNECTION) == (128, 2)


@pytest.mark.parametrize(
    ("soft", "expected"),
    [
        (0, 1),
        (128, 1),  # nothing left after the reserve: still one
        (131, 1),
        (132, 2),
        (133, 2),
        (1024, 448),
        (65536, 32704),
        (128 + 2 * MAX_CONNECTIONS_CAP - 1, MAX_CONNECTIONS_CAP - 1),
        (128 + 2 * MAX_CONNECTIONS_CAP, MAX_CONNECTIONS_CAP),
        (128 + 2 * MAX_CONNECTIONS_CAP + 2, MAX_CONNECTIONS_CAP),
        (2**40, MAX_CONNECTIONS_CAP),
        (INF, MAX_CONNECTIONS_CAP),
    ],
)
def test_connection_limit(monkeypatch: pytest.MonkeyPatch, soft: int, expected: int) -> None:
    nofile(monkeypatch, soft, INF)
    assert connection_limit() == expected


def test_the_soft_limit_sizes_it_not_the_hard_one(monkeypatch: pytest.MonkeyPatch) -> None:
    nofile(monkeypatch, 1024, 1_048_576)
    assert connection_limit() == 448


def test_conn_limits_takes_the_configured_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    nofile(monkeypatch, 1024, 1024)
    limits = Limits(max_header_kb=1, header_timeout_s=0.5, body_timeout_s=3600, max_connections=1)
    assert conn_limits(limits) == ConnLimits(1024, 0.5, 3600, 1)


def test_conn_limits_sizes_an_unset_max_connections_from_the_fd_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nofile(monkeypatch, 2128, INF)
    assert conn_limits(Limits()) == ConnLimits(64 * 1024, 10.0, 30.0, 1000)
    nofile(monkeypatch, INF, INF)
    assert conn_limits(Limits()).max_connections == MAX_CONNECTIONS_CAP


def test_a_configured_max_connections_ignores_the_fd_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nofile(monkeypatch, 256, 256)
    assert conn_limits(Limits(max_connections=5000)).max_connections == 5000


# -- raising the open-file limit ----------------------------------------------------------


def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch: pytest.MonkeyPatch) -> None:
    nofile(monkeypatch, 1024, 524_288)
    calls = setrlimit_records(monkeypatch)
    assert raise_fd_limit() == 524_288
    assert calls == [(resource.RLIMIT_NOFILE, (524_288, 524_288))]


def test_an_unlimited_hard_limit_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    nofile(monkeypatch, 1024, INF)
    calls = setrlimit_records(monkeypatch)
    assert raise_fd_limit() == INF
    assert calls == [(resource.RLIMIT_NOFILE, (INF, INF))]


@pytest.mark.parametrize(
    ("soft", "hard"),
    [(4096, 4096), (INF, INF), (8192, 4096)],
    ids=["equal", "both-unlimited", "soft-above-hard"],
)
def test_nothing_to_raise_sets_nothing(
    monkeypatch: pytest.MonkeyPatch, soft: int, hard: int
) -> None:
    nofile(monkeypatch, soft, hard)
    calls = setrlimit_records(monkeypatch)
    assert raise_fd_limit() == soft
    assert calls == []


@pytest.mark.parametrize(
    "error",
    [ValueError("not allowed to raise maximum limit"), PermissionError(1, "Operation")],
    ids=["value-error", "os-error"],
)
def test_a_refused_raise_keeps_the_soft_limit_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    nofile(monkeypatch, 1024, INF)
    calls = setrlimit_records(monkeypatch, error)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert raise_fd_limit() == 1024
    assert len(calls) == 1
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    message = caplog.records[0].getMessage()
    assert f"from 1024 to {INF}" in message
    assert str(error) in message


def test_other_errors_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    nofile(monkeypatch, 1024, 4096)
    setrlimit_records(monkeypatch, RuntimeError("unexpected"))
    with pytest.raises(RuntimeError, match="unexpected"):
        raise_fd_limit()


# -- the fd budget warning ----------------------------------------------------------------


def budget_warnings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, soft: int, conns: int
) -> list[str]:
    nofile(monkeypatch, soft, INF)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        check_fd_budget(ConnLimits(max_connections=conns))
    return [r.getMessage() for r in caplog.records]


def test_a_budget_that_fits_exactly_is_quiet(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert budget_warnings(monkeypatch, caplog, 1024, 448) == []  # 448 * 2 + 128 == 1024


def test_one_connection_past_the_budget_warns_with_the_numbers(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (message,) = budget_warnings(monkeypatch, caplog, 1024, 449)
    assert "449 connections may need 1026 open files" in message
    assert "the limit is 1024" in message


def test_one_descriptor_short_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert len(budget_warnings(monkeypatch, caplog, 1023, 448)) == 1


def test_an_unlimited_soft_limit_never_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert budget_warnings(monkeypatch, caplog, INF, MAX_CONNECTIONS_CAP) == []


# -- the guard's answers ------------------------------------------------------------------


def test_request_header_too_large() -> None:
    err = request_header_too_large(65536)
    assert (err.status, err.code, err.type) == (
        431,
        "request_header_too_large",
        "invalid_request_error",
    )
    assert err.message == "The request head (request line and headers) is over 65536 bytes."


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(30.0, "30"), (2.5, "2.5"), (0.001, "0.001"), (3600, "3600")],
)
def test_request_timeout_says_the_seconds_plainly(seconds: float, said: str) -> None:
    err = request_timeout(seconds)
    assert (err.status, err.code) == (408, "request_timeout")
    assert err.message == f"The request body did not arrive within {said} seconds."


def test_too_many_connections_is_a_server_error() -> None:
    err = too_many_connections()
    assert (err.status, err.code, err.type) == (503, "too_many_connections", "server_error")


@pytest.mark.parametrize(
    ("make", "status_line"),
    [
        (lambda: request_header_too_large(1024), b"HTTP/1.1 431 Request Header Fields Too Large"),
        (lambda: request_timeout(30.0), b"HTTP/1.1 408 Request Timeout"),
    ],
    ids=["431", "408"],
)
def test_a_closing_answer_is_a_complete_response_without_retry_after(
    make: Callable[[], ProxyError], status_line: bytes
) -> None:
    err = make()
    lines, body = split(closing_response(err))
    assert lines == [
        status_line,
        b"content-type: application/json",
        f"content-length: {len(body)}".encode(),
        b"connection: close",
    ]
    assert body == err.body()
    assert orjson.loads(body)["error"]["code"] == err.code


def test_the_503_answer_asks_to_retry_after_a_second() -> None:
    lines, body = split(closing_response(too_many_connections()))
    assert lines[0] == b"HTTP/1.1 503 Service Unavailable"
    assert lines[-2:] == [b"connection: close", b"retry-after: 1"]
    assert lines.count(b"retry-after: 1") == 1
    payload: dict[str, Any] = orjson.loads(body)
    assert payload["error"]["type"] == "server_error"


def test_content_length_counts_bytes_not_characters() -> None:
    err = ProxyError(503, "busy", "Trop de connexions: réessayez… 🚦", type_="server_error")
    lines, body = split(closing_response(err))
    assert len(body) > len(body.decode())
    assert f"content-length: {len(body)}".encode() in lines


def test_the_body_timeout_scope_key_is_namespaced() -> None:
    assert cl.BODY_TIMED_OUT == "curator.body_timed_out"


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(130, 4 * MAX_CONNECTIONS_CAP))
def test_the_sized_limit_is_the_most_the_soft_limit_carries(soft: int) -> None:
    """Sized from a soft limit, `max_connections` fits its fd budget (so the budget check
    stays quiet), and one more connection would not fit, unless the cap stopped it."""
    warnings: list[tuple[Any, ...]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resource, "getrlimit", lambda _which: (soft, INF))
        patch.setattr(cl.log, "warning", lambda *args: warnings.append(args))
        n = connection_limit()
        check_fd_budget(ConnLimits(max_connections=n))
        assert warnings == []
        assert 1 <= n <= MAX_CONNECTIONS_CAP
        if n < MAX_CONNECTIONS_CAP:
            check_fd_budget(ConnLimits(max_connections=n + 1))
            assert len(warnings) == 1
