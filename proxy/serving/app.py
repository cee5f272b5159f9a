"""The ASGI app: `GET /healthz`, `GET /metrics` (see `metrics:`), and every path under `/v1/`
proxied upstream when its method and path are fit to forward (`proxy.serving.paths`); other paths
get OpenAI-shaped 404s and 405s.

WebSocket sessions under `/v1/` are relayed to the route's upstream
(`proxy.serving.websocket`). Starlette does the lifespan and everything but `/v1/*`, which
is a pure-ASGI endpoint
(`proxy.serving.forwarding`): the relay needs the raw `receive` (to notice a client
leaving) and raw header bytes, and a Request/StreamingResponse round trip costs throughput
for nothing. The lifespan opens the
worker's `Edge` (`proxy.serving.edge`: upstream client, TokenCounter, summary caches) and the
metrics and audit writer (`proxy.observability.observers`); nothing lives at module level.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from policies.tokens import TokenCounter
from proxy.config.loader import Config
from proxy.observability.audit.health import health_body
from proxy.observability.exchange import (
    Observer,
)
from proxy.observability.observers import metrics_routes, open_observability, viewer_routes
from proxy.serving.edge import open_edge
from proxy.serving.forwarding import proxy_endpoint
from proxy.serving.guard import Guard, Inflight, KeyRing
from proxy.serving.paths import error_handlers
from proxy.serving.reload import WATCH_INTERVAL_S, reloading
from proxy.serving.websocket import relay_websocket
from proxy.types import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024 * 1024


def create_app(
    config: Config,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    observers: Sequence[Observer] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    watch_interval_s: float | None = WATCH_INTERVAL_S,
    on_started: Callable[[], None] = lambda: None,
    admin_socket: socket.socket | None = None,
) -> CuratorApp:
    """Build the proxy for `config`; `transport` swaps aiohttp for an httpx transport.

    A config read from a file reloads when its files change (polled every `watch_interval_s`;
    None: never) and on SIGHUP (`proxy.serving.reload`). `on_started` runs once the lifespan
    has opened everything, before any request (`curator serve` freezes what startup made);
    the admin listener (`metrics.port`) serves `admin_socket` when given, bound already."""
    inflight = Inflight()  # the guard counts, curation reads

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            # Per worker process: the audit writer's thread does not survive a fork.
            observing = open_observability(config, observers, admin_socket=admin_socket)
            seen = await stack.enter_async_context(observing)
            edge = await open_edge(stack, config, transport, seen, max_body_bytes)
            reloader = await stack.enter_async_context(
                reloading(
                    edge,
                    on_reload=seen.config_reloaded,
                    counter_for=partial(TokenCounter, on_fallback=seen.tokenizer_fallback),
                    interval_s=watch_interval_s,
                )
            )
            on_started()
            # A reload swaps `live.current`; each exchange reads it once, at its start.
            yield {"edge": reloader.live, "reloader": reloader, "audit": seen.audit}

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        *metrics_routes(config),
        *viewer_routes(config),
    ]
    return CuratorApp(
        Guard(proxy_endpoint, config=config, inflight=inflight),
        KeyRing(config.auth.keys),
        routes=routes,
        middleware=[Middleware(Guard, config=config, inflight=inflight)],
        exception_handlers=error_handlers(tuple(route.path for route in routes)),
        lifespan=lifespan,
    )


class CuratorApp(Starlette):
    """Starlette for the lifespan, `/healthz`, `/metrics` and 404s; `/v1/*` goes straight
    to the guarded proxy endpoint.

    Starlette's error middleware, router and per-send wrapper cost a few microseconds a
    request (measured), a few percent of a small proxied one. An exception escaping the
    endpoint (a bug: upstream and client failures are handled there) reaches the server,
    which logs it and answers 500 if nothing was sent yet, as Starlette's middleware would.
    """

    def __init__(self, proxied: ASGIApp, keys: KeyRing, **starlette: Any) -> None:
        super().__init__(**starlette)
        self._proxied = proxied
        self._keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan" and scope["path"].startswith("/v1/"):
            if scope["type"] == "http":
                # The head is frozen as the request starts: a server that appends a chunked
                # body's trailers to the headers it handed over (uvicorn's parsers do, when
                # not guarded: `proxy.serving.trailers`) changes no header read later.
                scope["headers"] = list(scope["headers"])
                await self._proxied(scope, receive, send)
            else:  # a WebSocket session (proxy.serving.websocket)
                edge = scope["state"]["edge"].current
                await relay_websocket(scope, receive, send, edge, self._keys)
        else:
            await super().__call__(scope, receive, send)


async def healthz(request: Request) -> Response:
    # Alive and serving even when the audit store is not: readiness detail, still 200.
    return Response(health_body(request.state.audit), media_type="application/json")
