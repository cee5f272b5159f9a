"""Pre-auth denial of service on real sockets, against the connection guard
(proxy.serving.connection_guard) and the guard's body-before-slot rule: oversized heads,
idle and dribbling connections, too many connections, slow bodies. Every proxy here has
proxy keys set: all of this must hold before any key is checked."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import orjson
import pytest

from proxy.config.auth import AuthConfig
from proxy.config.limits import Limits
from proxy.serving.server import uvicorn_options
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.raw_http import (
    connect,
    read_response,
    request_head,
    send_all_tolerant,
)
from tests.hardening.support import (
    CHAT,
    PROXY_KEY,
    WAIT_S,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    wait_for,
)

KEYED = {"authorization": f"Bearer {PROXY_KEY}"}
FLOOD = 150
"""Idle connections opened at once against max_connections=100."""
DRIBBLE_BYTES = 60
"""Bound on a dribbling client: one byte every 0.1 s, far past the 0.5 s head timeout."""


@contextmanager
def guarded(fake: FakeOpenAI, limits: Limits) -> Iterator[RunningProxy]:
    """A keyed proxy served like production, with the connection guard set from `limits`."""
    config = hardening_config(fake.origin, limits=limits, auth=AuthConfig(keys=(PROXY_KEY,)))
    with running_proxy(config, http=uvicorn_options(limits)["http"]) as proxy:
        yield proxy


def _error_code(body: bytes) -> str:
    code: str = orjson.loads(body)["error"]["code"]
    return code


def _closed(sock: socket.socket) -> bool:
    """Whether the peer has closed (EOF or reset); times out (fails) if it stays open."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def _rejected(proxy: RunningProxy, reason: str, http: httpx.Client | None = None) -> float:
    if http is None:
        text = httpx.get(proxy.origin + "/metrics", headers=KEYED, timeout=WAIT_S).text
    else:
        text = http.get("/metrics").text
    found = re.search(rf'^curator_rejected_total{{reason="{reason}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


# -- head size ----------------------------------------------------------------------------
def test_a_streamed_head_over_the_limit_gets_431_and_is_closed(fake: FakeOpenAI) -> None:
    with guarded(fake, Limits(max_header_kb=8)) as proxy, connect(proxy.port) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        send_all_tolerant(sock, b"a" * (4 << 20))  # never ends its header line
        response = read_response(sock)
        assert response.status == 431
        assert response.headers["connection"] == "close"
        assert _error_code(response.body) == "request_header_too_large"
        assert _closed(sock)
        assert _rejected(proxy, "request_header_too_large") == 1
    assert fake.requests == []


def test_a_complete_head_over_the_limit_gets_431(fake: FakeOpenAI) -> None:
    headers = {f"x-pad-{i}": "b" * 100 for i in range(100)}  # ~11 KB, sent at once
    with guarded(fake, Limits(max_header_kb=8)) as proxy, connect(proxy.port) as sock:
        sock.sendall(request_head("GET", "/v1/models", {**KEYED, **headers}, port=proxy.port))
        response = read_response(sock)
        assert (response.status, _error_code(response.body)) == (431, "request_header_too_large")
        assert _closed(sock)
    assert fake.requests == []


def test_a_head_under_the_limit_is_served(fake: FakeOpenAI) -> None:
    headers = {f"x-pad-{i}": "b" * 100 for i in range(60)}  # ~6.5 KB
    with guarded(fake, Limits(max_header_kb=8)) as proxy, connect(proxy.port) as sock:
        for _ in range(2):  # and again on the same keep-alive connection
            body = chat_body()
            head = {**KEYED, **headers, "content-length": str(len(body))}
            sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
            assert read_response(sock).status == 200


def test_an_oversized_head_pipelined_behind_a_request_gets_431_after_its_answer(
    fake: FakeOpenAI,
) -> None:
    fake.queue(Behavior(stall_s=0.5))  # the first request is still being answered
    body = chat_body()
    first = request_head("POST", CHAT, {**KEYED, "content-length": str(len(body))}) + body
    with guarded(fake, Limits(max_header_kb=8)) as proxy, connect(proxy.port) as sock:
        sock.sendall(first + b"GET /v1/models HTTP/1.1\r\nX-Pad: ")
        send_all_tolerant(sock, b"a" * (4 << 20))
        received = b""
        while chunk := sock.recv(65536):  # both answers, then the close
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 ")
    assert b"HTTP/1.1 431 " in received
    assert len(fake.requests) == 1


def test_a_complete_oversized_head_pipelined_behind_a_request_gets_431_after_its_answer(
    fake: FakeOpenAI,
) -> None:
    """The whole head arrives at once (the parser sees it complete, over the limit) while
    the first answer is still on its way: the 431 comes after that answer, not inside it."""
    fake.queue(Behavior(stall_s=0.5))
    body = chat_body()
    first = request_head("POST", CHAT, {**KEYED, "content-length": str(len(body))}) + body
    oversized = b"GET /v1/models HTTP/1.1\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n"
    with guarded(fake, Limits(max_header_kb=8)) as proxy, connect(proxy.port) as sock:
        sock.sendall(first + oversized)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    answer, _, rest = received.partition(b"HTTP/1.1 431 ")
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"}")  # the first answer's JSON body, whole
    assert rest
    assert len(fake.requests) == 1


# -- header timeout -----------------------------------------------------------------------
def test_idle_and_dribbling_connections_are_closed_after_the_header_timeout(
    fake: FakeOpenAI,
) -> None:
    limits = Limits(header_timeout_s=0.5)
    with guarded(fake, limits) as proxy, ExitStack() as stack:
        idle = stack.enter_context(connect(proxy.port))
        dribbler = stack.enter_context(connect(proxy.port))
        dribbler.settimeout(0.1)
        head = request_head("GET", "/healthz", port=proxy.port)
        closed = False
        for byte in head[:DRIBBLE_BYTES]:
            try:
                dribbler.send(bytes([byte]))
                closed = dribbler.recv(1) == b""
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            if closed:
                break
        assert closed, "a client sending one head byte every 0.1 s was never cut off"
        assert _closed(idle)
        # Served clients are unaffected, and the closes were counted.
        with httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http:
            assert http.post(CHAT, content=chat_body()).status_code == 200
        assert _rejected(proxy, "header_timeout") >= 2


def test_a_keep_alive_connection_gets_the_header_timeout_after_its_response(
    fake: FakeOpenAI,
) -> None:
    with guarded(fake, Limits(header_timeout_s=0.5)) as proxy, connect(proxy.port) as sock:
        body = chat_body()
        head = {**KEYED, "content-length": str(len(body))}
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
        assert read_response(sock).status == 200
        sock.sendall(b"GET /heal")  # the next head starts, and never ends
        assert _closed(sock)


def test_a_body_that_ends_after_its_answer_still_gets_the_header_timeout(
    fake: FakeOpenAI,
) -> None:
    """/healthz answers without reading a body; the body's last bytes then came in after the
    answer, which used to leave the connection with no deadline at all."""
    with guarded(fake, Limits(header_timeout_s=0.5)) as proxy, connect(proxy.port) as sock:
        sock.sendall(request_head("GET", "/healthz", {"content-length": "5"}, port=proxy.port))
        assert read_response(sock).status == 200
        sock.sendall(b"12345")
        assert _closed(sock)


def test_a_slow_upstream_is_not_a_slow_client(fake: FakeOpenAI) -> None:
    """The head timeout does not run while the app answers (here a 1.5 s upstream)."""
    fake.queue(Behavior(stall_s=1.5))
    with (
        guarded(fake, Limits(header_timeout_s=0.5)) as proxy,
        httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http,
    ):
        assert http.post(CHAT, content=chat_body()).status_code == 200


# -- max connections ----------------------------------------------------------------------
def test_past_max_connections_new_ones_get_503_and_served_ones_keep_working(
    fake: FakeOpenAI,
) -> None:
    with guarded(fake, Limits(max_connections=3, header_timeout_s=30)) as proxy, ExitStack() as st:
        http = st.enter_context(httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S))
        assert http.get("/healthz").status_code == 200  # one keep-alive connection
        held = [st.enter_context(connect(proxy.port)) for _ in range(2)]
        for sock in held:  # answered: the server has counted them
            sock.sendall(request_head("GET", "/healthz", port=proxy.port))
            assert read_response(sock).status == 200
        with connect(proxy.port) as extra:
            response = read_response(extra)
            assert (response.status, _error_code(response.body)) == (503, "too_many_connections")
            assert response.headers["retry-after"] == "1"
            assert _closed(extra)
        assert http.get("/healthz").status_code == 200
        assert http.post(CHAT, content=chat_body()).status_code == 200
        assert _rejected(proxy, "too_many_connections", http) == 1
        for sock in held:
            sock.close()

        def fresh_connection_served() -> bool:
            try:
                return httpx.get(proxy.origin + "/healthz", timeout=WAIT_S).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(fresh_connection_served, "a new connection once the held ones closed")


def test_an_idle_connection_flood_is_bounded_and_every_descriptor_comes_back(
    fake: FakeOpenAI,
) -> None:
    limits = Limits(max_connections=100, header_timeout_s=2)
    with guarded(fake, limits) as proxy, ExitStack() as stack:
        state = proxy.server._server.server_state  # the worker's own set of open connections
        flood = [stack.enter_context(connect(proxy.port)) for _ in range(FLOOD)]
        # Each connection past the cap evicts the oldest idle one: never more than the cap.
        wait_for(lambda: len(state.connections) <= 100, "the cap to hold")
        assert all(_closed(sock) for sock in flood[: FLOOD - 100])  # the oldest went first
        # The server closes the rest itself: the clients still hold their ends open.
        wait_for(lambda: not state.connections, "the server to close every idle connection")
        assert all(_closed(sock) for sock in flood)
        with httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http:
            assert http.post(CHAT, content=chat_body()).status_code == 200
            assert _rejected(proxy, "connection_evicted", http) == FLOOD - 100
            assert _rejected(proxy, "too_many_connections", http) == 0


def test_during_an_idle_flood_new_clients_and_health_probes_get_in(fake: FakeOpenAI) -> None:
    limits = Limits(max_connections=20, header_timeout_s=30)
    with guarded(fake, limits) as proxy, ExitStack() as stack:
        flood = [stack.enter_context(connect(proxy.port)) for _ in range(20)]
        for _ in range(3):  # the attacker keeps the worker full of idle connections
            flood.append(stack.enter_context(connect(proxy.port)))
            assert httpx.get(proxy.origin + "/healthz", timeout=WAIT_S).status_code == 200
            with httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http:
                assert http.post(CHAT, content=chat_body()).status_code == 200
        state = proxy.server._server.server_state
        assert len(state.connections) <= 20


# -- body timeout and in-flight slots ----------------------------------------------------
def test_slow_bodies_get_408_and_never_hold_an_inflight_slot(fake: FakeOpenAI) -> None:
    limits = Limits(max_inflight=1, body_timeout_s=1.5)
    head = {**KEYED, "content-type": "application/json", "content-length": "100000"}
    with guarded(fake, limits) as proxy, ExitStack() as stack:
        slow = [stack.enter_context(connect(proxy.port)) for _ in range(3)]
        for sock in slow:
            sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + b'{"mo')
        with httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http:
            statuses = [http.post(CHAT, content=chat_body()).status_code for _ in range(5)]
        assert statuses == [200] * 5
        for sock in slow:
            response = read_response(sock)
            assert (response.status, _error_code(response.body)) == (408, "request_timeout")
            assert _closed(sock)
        timed_out = [r for r in proxy.wait_records(len(statuses) + 3) if r.status == 408]
        assert [(r.error, r.outcome) for r in timed_out] == [("request_timeout", "proxy_error")] * 3
        assert _rejected(proxy, "request_timeout") == 3
    assert len(fake.requests) == len(statuses)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_sent_in_pieces_within_the_timeout_is_forwarded(
    fake: FakeOpenAI, chunked: bool
) -> None:
    body = chat_body("x" * 5000)
    pieces = [body[:100], body[100:2000], body[2000:]]
    with (
        guarded(fake, Limits(body_timeout_s=5)) as proxy,
        httpx.Client(base_url=proxy.origin, headers=KEYED, timeout=WAIT_S) as http,
    ):
        content = iter(pieces) if chunked else body
        assert http.post(CHAT, content=content).status_code == 200
    assert fake.last.body == body
