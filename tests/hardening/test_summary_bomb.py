"""A hostile summary upstream over real sockets: a gzip bomb as the summarizer's reply fails
that call (the request goes on unsummarized, as with any summarizer failure) and the proxy
never holds much more than the reply limit, whatever the bomb inflates to."""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from policies.chain import Chain
from policies.policy import Policy
from policies.summarizer import Summarizer
from proxy.config.loader import Route, UpstreamConfig
from proxy.summarizing.services import MAX_REPLY_BYTES
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import CHAT, hardening_config, running_proxy, upstream_server

MIB = 1024 * 1024
MEMBER = gzip.compress(b"\0" * (16 * MIB), 9)
INFLATED_MB = 256


class Bomb:
    """An upstream whose every chat completion is gzip that inflates to `INFLATED_MB` MB
    (gzip members of zeros, one after another: ~16 KB each)."""

    def __init__(self) -> None:
        self.body = MEMBER * (INFLATED_MB // 16)
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.calls += 1
        headers = [
            (b"content-type", b"application/json"),
            (b"content-encoding", b"gzip"),
            (b"content-length", str(len(self.body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


@pytest.fixture
def bomb() -> Iterator[tuple[Bomb, ServerThread]]:
    app = Bomb()
    with upstream_server(app) as server:
        yield app, server


@contextmanager
def _summarizing(fake_origin: str, bomb_origin: str) -> Iterator[str]:
    config = hardening_config(fake_origin)
    summarizer = Summarizer(upstream="bomb", model="gpt-4o-mini", trigger_tokens=200)
    policy = Policy("summary", Chain((summarizer,)))
    config = replace(
        config,
        upstreams={**config.upstreams, "bomb": UpstreamConfig("bomb", bomb_origin + "/v1")},
        policies={**config.policies, "summary": policy},
        routes=(Route("default", "fake", "summary"),),
    )
    with running_proxy(config) as proxy:
        yield proxy.origin


def _long_chat() -> dict[str, object]:
    turns = []
    for i in range(12):
        turns.append({"role": "user", "content": f"question {i}: " + "words " * 60})
        turns.append({"role": "assistant", "content": f"answer {i}: " + "more " * 60})
    turns.append({"role": "user", "content": "and now?"})
    return {"model": "gpt-4o", "messages": turns}


def test_a_gzip_bomb_summary_fails_open_within_the_reply_limit(
    bomb: tuple[Bomb, ServerThread], fake: FakeOpenAI
) -> None:
    app, server = bomb
    assert len(app.body) < MIB  # under a megabyte on the wire
    body = _long_chat()
    with (
        _summarizing(fake.origin, server.origin) as origin,
        httpx.Client(base_url=origin, timeout=60) as client,
    ):
        client.post(CHAT, json=body)  # the first request also loads what a worker keeps
        tracemalloc.start()
        try:
            response = client.post(CHAT, json=body)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status_code == 200, response.text
    assert app.calls == 2  # a failed summary is not cached: asked again, failed again
    assert fake.last.json()["messages"] == body["messages"]  # sent on, unsummarized
    # Bounded by the reply limit (plus what a request costs: ~0.2 MB), not by the bomb.
    assert peak < 3 * MAX_REPLY_BYTES, f"{peak / MIB:.0f} MB allocated at the peak"
