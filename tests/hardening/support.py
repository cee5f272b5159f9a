"""Helpers for the fault and abuse suite: request bodies, configs, a proxy on a real socket,
and waiting (raw HTTP is in raw_http.py, scripted upstreams in upstreams.py).

Everything waits on conditions with generous deadlines; nothing asserts a duration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from starlette.types import ASGIApp

from policies.policy import Policy
from proxy.config.auth import AuthConfig
from proxy.config.limits import Limits
from proxy.config.loader import (
    Config,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
)
from proxy.observability.exchange import ExchangeRecord
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import HOST, ServerThread

CHAT = "/v1/chat/completions"
UPSTREAM_KEY = "sk-upstream-Hardening-5ecret-0123456789abcdef"
PROXY_KEY = "ck-proxy-Hardening-key-9876543210"
WAIT_S = 10.0
"""Generous bound for waiting on events; never a speed assertion."""
SHORT_READ_S = 1.0
ROUTES = ("keyed", "short", "dead", "trap")
"""Routes picked with the `x-route` header; anything else goes to the fake as is."""


def chat_body(
    content: str = "Status?", *, stream: bool = False, extra: Mapping[str, Any] | None = None
) -> bytes:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
    if stream:
        body["stream"] = True
    return orjson.dumps({**body, **(extra or {})})


def hardening_config(
    fake_origin: str,
    *,
    dead_port: int = 9,
    trap_origin: str = "http://127.0.0.1:9",
    auth: AuthConfig | None = None,
    limits: Limits | None = None,
    api_key: str | None = None,
    read_timeout_s: float = 30.0,
) -> Config:
    """A config whose default route goes to the fake (with `api_key`, if given)."""
    base = fake_origin + "/v1"
    upstreams = {
        "fake": UpstreamConfig("fake", base, api_key=api_key, read_timeout_s=read_timeout_s),
        "keyed": UpstreamConfig("keyed", base, api_key=UPSTREAM_KEY, read_timeout_s=30.0),
        "short": UpstreamConfig("short", base, api_key=UPSTREAM_KEY, read_timeout_s=SHORT_READ_S),
        "dead": UpstreamConfig(
            "dead", f"http://{HOST}:{dead_port}/v1", api_key=UPSTREAM_KEY, connect_timeout_s=2
        ),
        "trap": UpstreamConfig("trap", trap_origin + "/v1"),
    }
    routes = tuple(
        Route(name, name, "off", RouteMatch(headers=(("x-route", name),))) for name in ROUTES
    )
    return Config(
        source="<hardening>",
        server=ServerConfig(limits=limits or Limits()),
        upstreams=upstreams,
        policies={"off": Policy("off")},
        routes=(*routes, Route("default", "fake", "off")),
        auth=auth or AuthConfig(),
    )


def without_trap_route(config: Config) -> Config:
    """The config minus its `trap` route: nothing may lead to the trap at all."""
    return replace(config, routes=tuple(r for r in config.routes if r.name != "trap"))


@dataclass
class RunningProxy:
    """A proxy app under uvicorn on loopback, with the records its observer received."""

    server: ServerThread
    records: list[ExchangeRecord] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.server.origin

    @property
    def port(self) -> int:
        return self.server.port

    def wait_records(self, count: int) -> list[ExchangeRecord]:
        wait_for(lambda: len(self.records) >= count, f"{count} exchange record(s)")
        return self.records


@contextmanager
def running_proxy(config: Config, **options: Any) -> Iterator[RunningProxy]:
    """`create_app(config)` served like production (uvloop, httptools, aiohttp upstream)."""
    records: list[ExchangeRecord] = []
    app = create_app(config, observers=(records.append,))
    settings = {**uvicorn_options(), "log_level": "warning", "timeout_graceful_shutdown": 3}
    with ServerThread(app, **{**settings, **options}) as server:
        yield RunningProxy(server, records)


def upstream_server(app: ASGIApp) -> ServerThread:
    """A test upstream under uvicorn with the production event loop.

    Under the plain asyncio loop every response on a reused (keep-alive) connection waited
    ~40 ms here (Nagle against delayed ACKs); uvloop answers at once, which volume needs.
    """
    return ServerThread(app, loop=uvicorn_options()["loop"])


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
