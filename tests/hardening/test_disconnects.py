"""A client that leaves: mid-stream, before the first byte, on a plain request, mid-upload.

Each time the upstream side must be closed (the fake sees its client leave, and no proxy
connection to it stays open), and the exchange is recorded as `client_disconnect`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.raw_http import connect, connections_to, recv_until, request_head
from tests.hardening.support import (
    CHAT,
    WAIT_S,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    wait_for,
)


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    with running_proxy(hardening_config(fake.origin)) as running:
        yield running


def _fake_port(fake: FakeOpenAI) -> int:
    return int(fake.origin.rsplit(":", 1)[1])


def _post(sock: socket.socket, port: int, body: bytes) -> None:
    head = {"content-type": "application/json", "content-length": str(len(body))}
    sock.sendall(request_head("POST", CHAT, head, port=port) + body)


def _assert_upstream_closed(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    assert fake.disconnected.wait(WAIT_S), "the upstream request was never closed"
    record = proxy.wait_records(1)[0]
    assert record.outcome == "client_disconnect"
    # The pool holds no connection to the upstream: the aborted one was closed, not kept.
    wait_for(lambda: connections_to(_fake_port(fake)) == 0, "upstream connections to close")
    _assert_still_serving(proxy, fake)


def _assert_still_serving(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    with httpx.Client(base_url=proxy.origin, timeout=WAIT_S) as http:
        assert http.post(CHAT, content=chat_body()).status_code == 200
    assert fake.last.json()["messages"][0]["content"] == "Status?"


def test_leaving_mid_stream(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    never = threading.Event()
    fake.queue(Behavior(release=never))
    with connect(proxy.port) as sock:
        _post(sock, proxy.port, chat_body(stream=True))
        recv_until(sock, b"data: ")  # the head and the first event arrived
    _assert_upstream_closed(proxy, fake)
    assert proxy.records[0].status == 200
    assert not never.is_set()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
def test_leaving_before_the_first_byte(proxy: RunningProxy, fake: FakeOpenAI, stream: bool) -> None:
    fake.queue(Behavior(stall_s=60))
    with connect(proxy.port) as sock:
        _post(sock, proxy.port, chat_body(stream=stream))
        wait_for(lambda: len(fake.requests) == 1, "the request to reach the upstream")
    _assert_upstream_closed(proxy, fake)
    record = proxy.records[0]
    assert record.status is None
    assert record.upstream_status is None


def test_leaving_mid_upload(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    body = chat_body("x" * 100_000)
    with connect(proxy.port) as sock:
        head = {"content-type": "application/json", "content-length": str(len(body))}
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body[:50_000])
    record = proxy.wait_records(1)[0]
    assert record.outcome == "client_disconnect"
    assert fake.requests == []  # nothing half-read is ever sent upstream
    _assert_still_serving(proxy, fake)


def test_many_abandoned_streams_leave_nothing_open(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    never = threading.Event()
    fake.queue(*(Behavior(release=never) for _ in range(20)))
    socks = [connect(proxy.port) for _ in range(20)]
    for sock in socks:
        _post(sock, proxy.port, chat_body(stream=True))
    for sock in socks:
        recv_until(sock, b"data: ")
    assert connections_to(_fake_port(fake)) == 20
    for sock in socks:
        sock.close()
    records = proxy.wait_records(20)
    assert {r.outcome for r in records} == {"client_disconnect"}
    wait_for(lambda: connections_to(_fake_port(fake)) == 0, "upstream connections to close")
    wait_for(lambda: connections_to(proxy.port) == 0, "client connections to close")
