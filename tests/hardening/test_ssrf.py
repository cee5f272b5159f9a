"""SSRF: only configured upstreams are ever contacted. Body fields, headers, request targets
and upstream redirects that name another server are all ignored or relayed, and a trap
server listening on loopback must never see a single request."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.raw_http import connect, read_response, request_head
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    upstream_server,
    without_trap_route,
)
from tests.hardening.upstreams import Trap


@pytest.fixture(scope="module")
def served(fake_server: FakeOpenAI) -> Iterator[tuple[RunningProxy, Trap, str]]:
    app = Trap()
    with upstream_server(app) as trap:
        config = without_trap_route(hardening_config(fake_server.origin, trap_origin=trap.origin))
        with running_proxy(config) as proxy:
            yield proxy, app, trap.origin


@pytest.fixture
def setup(served: tuple[RunningProxy, Trap, str]) -> Iterator[tuple[RunningProxy, Trap, str]]:
    yield served
    assert served[1].hits == [], f"the trap was contacted: {served[1].hits}"


def test_base_url_fields_in_the_body_are_just_data(
    setup: tuple[RunningProxy, Trap, str], fake: FakeOpenAI
) -> None:
    proxy, _, origin = setup
    fields = dict.fromkeys(("api_base", "base_url", "url", "endpoint"), origin + "/v1")
    with httpx.Client(base_url=proxy.origin) as http:
        response = http.post(CHAT, content=chat_body(extra=fields))
    assert response.status_code == 200
    assert fake.last.json()["api_base"] == origin + "/v1"  # forwarded as sent, to the fake


@pytest.mark.parametrize(
    "name",
    [
        "host",
        "x-base-url",
        "x-forwarded-host",
        "x-forwarded-server",
        "x-host",
        "x-original-url",
        "x-rewrite-url",
        "forwarded",
        "x-upstream",
    ],
)
def test_routing_headers_are_ignored(
    setup: tuple[RunningProxy, Trap, str], fake: FakeOpenAI, name: str
) -> None:
    proxy, _, origin = setup
    target = origin.removeprefix("http://")
    value = {"x-original-url": "/trap", "x-rewrite-url": "/trap", "forwarded": f"host={target}"}
    headers = {name: value.get(name, origin if name == "x-base-url" else target)}
    with httpx.Client(base_url=proxy.origin) as http:
        assert http.post(CHAT, content=chat_body(), headers=headers).status_code == 200
    assert fake.last.header("host") == fake.origin.removeprefix("http://")
    assert fake.last.path == CHAT


@pytest.mark.parametrize(
    ("target", "forwarded"),
    [
        ("{origin}/v1/chat/completions", True),  # absolute form
        ("/v1/@{netloc}/chat/completions", True),
        ("/v1//{netloc}/chat/completions", False),  # not in normal form: 400 invalid_path
        ("/v1/%2F%2F{netloc}/chat/completions", False),
        ("/v1/../../{netloc}/v1/models", False),
        ("/v1/..%2F..%2F{netloc}/v1/models", False),
        ("/v1/chat/completions?url={origin}/v1/models", True),
    ],
)
def test_request_targets_cannot_change_the_upstream(
    setup: tuple[RunningProxy, Trap, str], fake: FakeOpenAI, target: str, forwarded: bool
) -> None:
    proxy, _, origin = setup
    path = target.format(origin=origin, netloc=origin.removeprefix("http://"))
    body = chat_body()
    head = {"content-type": "application/json", "content-length": str(len(body))}
    with connect(proxy.port) as sock:
        sock.sendall(request_head("POST", path, head, port=proxy.port) + body)
        response = read_response(sock)
    assert b"trap" not in response.body
    # The configured upstream got it, whatever it makes of it; or nobody did.
    assert len(fake.requests) == (1 if forwarded else 0)
    assert response.status != 400 if forwarded else response.status == 400


def test_connect_is_not_a_tunnel(setup: tuple[RunningProxy, Trap, str]) -> None:
    proxy, _, origin = setup
    netloc = origin.removeprefix("http://")
    with connect(proxy.port) as sock:
        sock.sendall(request_head("CONNECT", netloc, {}, port=proxy.port))
        data = sock.recv(65536)
    assert not data.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_upstream_redirects_are_relayed_never_followed(
    setup: tuple[RunningProxy, Trap, str], fake: FakeOpenAI, status: int
) -> None:
    proxy, _, origin = setup
    location = (b"location", f"{origin}/v1/chat/completions".encode())
    fake.queue(Behavior(status=status, body=b"{}", headers=(location,)))
    with httpx.Client(base_url=proxy.origin, follow_redirects=False) as http:
        response = http.post(CHAT, content=chat_body())
    assert response.status_code == status
    assert response.headers["location"] == f"{origin}/v1/chat/completions"
    assert len(fake.requests) == 1
