"""What the proxy logs about a failing upstream, over real sockets: never the query string
(clients put keys there: `?api-key=`, `?key=`), never the upstream's raw status line or
header bytes (aiohttp's messages quote them), and never either in the answer to the client.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import httpx
import pytest

from proxy.config.loader import UpstreamConfig
from tests.fakes.servers import HOST, full_accept_queue
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.raw_http import RawResponse, connect, read_response, request_head
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
)
from tests.hardening.upstreams import RawUpstream

QUERY_KEY = "sk-proj-" + "QueryLeak7_" * 3
"""Sent in the query string; it must show up nowhere the proxy writes."""
RAW_MARK = "RawHeaderMark" + "9f3e"
"""A marker inside the upstream's malformed bytes; logs must not quote them."""

MALFORMED = {
    "status line": f"HTTP/1.1 2x0 {RAW_MARK}\r\n\r\n".encode(),
    "header without colon": f"HTTP/1.1 200 OK\r\n{RAW_MARK} no colon\r\n\r\n".encode(),
    "control byte in a header": f"HTTP/1.1 200 OK\r\nX-A: {RAW_MARK}\x01\x7f\r\n\r\n".encode(),
    "bad content-length": f"HTTP/1.1 200 OK\r\nContent-Length: {RAW_MARK}\r\n\r\n".encode(),
    "not http at all": f"SSH-2.0-{RAW_MARK}\r\n\r\n".encode(),
}


@contextmanager
def _proxy_to(origin: str, connect_timeout_s: float = 5.0) -> Iterator[RunningProxy]:
    config = hardening_config(origin)
    upstream = UpstreamConfig("fake", origin + "/v1", connect_timeout_s=connect_timeout_s)
    with running_proxy(replace(config, upstreams={**config.upstreams, "fake": upstream})) as p:
        yield p


def _post(proxy: RunningProxy, query: str) -> httpx.Response:
    with httpx.Client(base_url=proxy.origin, timeout=30) as http:
        return http.post(f"{CHAT}?{query}", content=chat_body())


def _proxy_log(caplog: pytest.LogCaptureFixture) -> str:
    """What the proxy and its server logged (the test's own httpx client logs the URL)."""
    return "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''}"
        for r in caplog.records
        if r.name.split(".")[0] in ("curator", "uvicorn", "aiohttp", "asyncio")
    )


def _assert_clean(text: str) -> None:
    assert QUERY_KEY not in text
    assert QUERY_KEY[8:20] not in text
    assert RAW_MARK not in text
    assert "api-key=" not in text
    assert "key=" not in text


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_upstream_head_is_logged_without_its_bytes_or_the_query(
    reply: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream = RawUpstream(reply)
    try:
        with _proxy_to(f"http://{HOST}:{upstream.port}") as proxy:
            response = _post(proxy, f"api-version=1&api-key={QUERY_KEY}")
            assert response.status_code == 502
            _assert_clean(response.text + str(response.headers))
    finally:
        upstream.close()
    logged = _proxy_log(caplog)
    _assert_clean(logged)
    assert f"{HOST}:{upstream.port}/v1/chat/completions" in logged  # where, at most


def test_a_connect_timeout_is_logged_without_the_query(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with (
        full_accept_queue() as port,
        _proxy_to(f"http://{HOST}:{port}", connect_timeout_s=0.5) as proxy,
    ):
        response = _post(proxy, f"key={QUERY_KEY}")
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_timeout"
        _assert_clean(response.text + str(response.headers))
    logged = _proxy_log(caplog)
    _assert_clean(logged)
    assert f"{HOST}:{port}/v1/chat/completions" in logged


URL_PASSWORD = "gw-" + "UrlPassw0rd_" * 3
"""The password of an upstream `base_url` given as `http://user:password@host/v1`."""


def _raw_post(proxy: RunningProxy, target: str) -> RawResponse:
    body = chat_body()
    head = {"content-type": "application/json", "content-length": str(len(body))}
    with connect(proxy.port) as sock:
        sock.sendall(request_head("POST", target, head, port=proxy.port) + body)
        return read_response(sock)


def test_url_credentials_and_query_keys_reach_no_log_line(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    # Every logger, libraries' too, at DEBUG; raw sockets, so the test's own client logs none.
    caplog.set_level(logging.DEBUG)
    host = fake.origin.removeprefix("http://")
    config = hardening_config(fake.origin)
    upstream = UpstreamConfig("fake", f"http://team:{URL_PASSWORD}@{host}/v1")
    with running_proxy(replace(config, upstreams={**config.upstreams, "fake": upstream})) as p:
        response = _raw_post(p, f"{CHAT}?api-version=1&key={QUERY_KEY}")
    assert response.status == 200, response.body
    basic = "Basic " + base64.b64encode(f"team:{URL_PASSWORD}".encode()).decode()
    assert fake.last.header("authorization") == basic
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert URL_PASSWORD not in logged
    assert basic[6:] not in logged
    _assert_clean(logged)
