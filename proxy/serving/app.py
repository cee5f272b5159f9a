"""The ASGI app: `GET /healthz`, `GET /metrics` (see `metrics:`), and every path under `/v1/`
proxied upstream when its method and path are fit to forward (`proxy.serving.paths`); other paths
get OpenAI-shaped 404s and 405s.

Starlette does the lifespan and everything but `/v1/*`, which is a pure-ASGI endpoint:
the relay needs the raw `receive` (to notice a client leaving) and raw header bytes, and
a Request/StreamingResponse round trip costs throughput for nothing. The lifespan opens the
worker's `Edge` (`proxy.serving.edge`: upstream client, TokenCounter, summary caches) and the
metrics and audit writer (`proxy.observability.observers`); nothing lives at module level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from time import perf_counter
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from policies.summary_io import Services
from policies.tokens import TokenCounter
from proxy.config.loader import Config, UpstreamConfig
from proxy.config.loader import Route as ConfigRoute
from proxy.curation.plan import CHAT_PATH, ChatPlan, plan_chat
from proxy.errors import JSON_HEADERS, ProxyError, no_route
from proxy.observability.exchange import (
    ExchangeRecord,
    Observer,
    Outcome,
    SummaryCall,
    new_id,
    notify,
    recording,
)
from proxy.observability.observers import metrics_routes, open_observability, viewer_routes
from proxy.observability.usage.body_cap import audit_bytes
from proxy.observability.usage.spend import Sent, Spend, account
from proxy.observability.usage.tap import ResponseTap
from proxy.protocols.chat import CHAT
from proxy.serving.edge import Edge, open_edge
from proxy.serving.guard import PROXY_CREDENTIAL, Guard, Inflight
from proxy.serving.incoming import (
    ClientGone,
    client_credential,
    has_header,
    header_map,
    read_body,
    sniff_model,
)
from proxy.serving.paths import checked_target, error_handlers
from proxy.serving.reload import WATCH_INTERVAL_S, reloading
from proxy.upstream.client import UpstreamRequest
from proxy.upstream.hygiene import request_headers, upstream_url
from proxy.upstream.relay import Relay, forward

log = logging.getLogger("curator.app")

MAX_BODY_BYTES = 64 * 1024 * 1024
POLICY_HEADER = b"x-curator-policy"


def create_app(
    config: Config,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    observers: Sequence[Observer] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    watch_interval_s: float | None = WATCH_INTERVAL_S,
) -> CuratorApp:
    """Build the proxy for `config`; `transport` swaps aiohttp for an httpx transport.

    A config read from a file reloads when its files change (polled every
    `watch_interval_s`; None: never) and on SIGHUP; see `proxy.serving.reload`.
    """

    inflight = Inflight()  # the guard counts, the chat path reads

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            # Per worker process: the audit writer's thread does not survive a fork.
            seen = await stack.enter_async_context(open_observability(config, observers))
            edge = await open_edge(stack, config, transport, seen, max_body_bytes, inflight)
            reloader = await stack.enter_async_context(
                reloading(
                    edge,
                    on_reload=seen.config_reloaded,
                    counter_for=lambda models: TokenCounter(
                        models, on_fallback=seen.tokenizer_fallback
                    ),
                    interval_s=watch_interval_s,
                )
            )
            # A reload swaps `live.current`; each exchange reads it once, at its start.
            yield {"edge": reloader.live, "reloader": reloader}

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        *metrics_routes(config),
        *viewer_routes(config),
    ]
    return CuratorApp(
        Guard(proxy_endpoint, config=config, inflight=inflight),
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

    def __init__(self, proxied: ASGIApp, **starlette: Any) -> None:
        super().__init__(**starlette)
        self._proxied = proxied

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            await self._proxied(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


async def healthz(_request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


async def proxy_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """Forward one `/v1/*` request (curating chat completions) and record it."""
    edge: Edge = scope["state"]["edge"].current
    exchange = _Exchange(scope, edge)
    if edge.metrics is not None:
        edge.metrics.inflight.inc()
    try:
        await exchange.run(receive, send)
    finally:
        if edge.metrics is not None:
            edge.metrics.inflight.dec()
        if edge.observers:
            notify(edge.observers, exchange.record())


class _Exchange:
    """One request's journey; its fields become the ExchangeRecord."""

    def __init__(self, scope: Scope, edge: Edge) -> None:
        self.scope = scope
        self.edge = edge
        self.id = new_id()
        self.started = perf_counter()
        self.started_at = time.time()
        self.path: str = scope["path"]
        self.upstream: UpstreamConfig | None = None
        self.plan: ChatPlan | None = None
        self.route: str | None = None
        self.relay = Relay(self.id)
        self.headers: list[tuple[bytes, bytes]] = [(b"x-curator-request-id", self.id.encode())]
        """The x-curator-* response headers, on success and on the proxy's own errors."""
        self.status: int | None = None
        self.outcome: Outcome = "ok"
        self.error: str | None = None
        self.summary_calls: list[SummaryCall] = []

    async def run(self, receive: Receive, send: Send) -> None:
        try:
            target = checked_target(self.scope)  # before the body: nothing to read for
            body = await read_body(receive, self.edge.max_body_bytes)
            request = await self._prepare(body, target)
            edge = self.edge
            await forward(edge.client, request, receive, send, self.headers, self.relay, edge.loop)
            self.status, self.outcome = self.relay.status, self.relay.outcome
            self.error = self.relay.error
        except ClientGone:
            self.outcome = "client_disconnect"
        except ProxyError as err:
            self.outcome = "upstream_error" if err.status in (502, 504) else "proxy_error"
            self.status, self.error = err.status, err.code
            await send_error(send, err, self.headers)
        except BaseException:
            self.outcome = "upstream_error" if self.relay.status else "proxy_error"
            self.status, self.error = self.relay.status, self.relay.error
            raise

    async def _prepare(self, body: bytes, target: bytes) -> UpstreamRequest:
        edge, scope = self.edge, self.scope
        if scope["method"] == "POST" and self.path == CHAT_PATH:
            wanted = edge.route_by_headers or has_header(scope["headers"], POLICY_HEADER)
            headers = header_map(scope["headers"]) if wanted else {}
            self.plan = await plan_chat(body, self.path, headers, edge.chat, self._services_for)
            route, body = self.plan.route, self.plan.body
            self.headers.extend(self.plan.headers)
            # Every chat response is tapped for its usage; the audit may keep the body too.
            self.relay.tap = ResponseTap(audit_bytes(edge.config.audit, self.plan.mode), CHAT)
        else:
            headers = header_map(scope["headers"]) if edge.route_by_headers else {}
            model = sniff_model(body) if edge.route_by_model else None
            found = edge.chat.router.route(self.path, model, headers)
            if found is None:
                raise no_route()
            route = found
        self.route = route.name
        self.upstream = upstream = edge.config.upstreams[route.upstream]
        return UpstreamRequest(
            method=scope["method"],
            url=upstream_url(upstream.base_url, target, scope["query_string"]),
            headers=request_headers(scope["headers"], upstream.api_key),
            body=body,
            connect_timeout_s=upstream.connect_timeout_s,
            read_timeout_s=upstream.read_timeout_s,
        )

    def _services_for(self, route: ConfigRoute) -> Services:
        """Summarizer services for this request (async chains only)."""
        from proxy.summarizing.services import services_for  # see the lifespan: loaded when needed

        edge = self.edge
        authorization = next(
            (v for n, v in self.scope["headers"] if n.lower() == b"authorization"), None
        )
        services = services_for(
            edge.client,
            edge.config,
            edge.caches,
            authorization=authorization,
            route_upstream=route.upstream,
        )
        if not edge.config.audit.enabled:
            return services
        # Each model call gets its own audit record, linked to this request.
        return replace(services, complete=recording(services.complete, self.summary_calls))

    def _credential(self) -> str | None:
        """The client's credential, for the audit log's fingerprint (nothing else reads it)."""
        if self.plan is None or not self.edge.config.audit.enabled:
            return None
        proxy_key: bytes | None = self.scope.get(PROXY_CREDENTIAL)
        if proxy_key is not None:  # the guard took the client's credential headers out
            return proxy_key.decode("latin-1")
        return client_credential(self.scope["headers"])

    def record(self) -> ExchangeRecord:
        plan, relay = self.plan, self.relay
        ttfb = relay.first_byte_at - self.started if relay.first_byte_at is not None else None
        return ExchangeRecord(
            id=self.id,
            started_at=self.started_at,
            method=self.scope["method"],
            path=self.path,
            route=self.route,
            upstream=self.upstream.name if self.upstream is not None else None,
            policy=plan.policy if plan else None,
            model=plan.model if plan else None,
            skipped=plan.skipped if plan else None,
            body=plan.parsed if plan else None,
            original=plan.original if plan else None,
            curated=plan.curated if plan else None,
            actions=plan.actions if plan else (),
            tokens_before=plan.tokens_before if plan else None,
            tokens_after=plan.tokens_after if plan else None,
            curation_s=plan.curation_s if plan else None,
            summary=plan.summary if plan else None,
            status=self.status,
            upstream_status=relay.status,
            latency_s=perf_counter() - self.started,
            ttfb_s=ttfb,
            outcome=self.outcome,
            error=self.error,
            mode=plan.mode if plan else None,
            authorization=self._credential(),
            response=relay.tap if relay.tap is not None and relay.tap.max_bytes else None,
            incomplete=relay.incomplete,
            summary_calls=tuple(self.summary_calls),
            spend=self._spend(),
        )

    def _spend(self) -> Spend | None:
        plan, edge = self.plan, self.edge
        if plan is None:
            return None
        headers = self.scope["headers"]
        sent = Sent.of(plan.model, plan.parsed, plan.original, headers, self.relay.tap)
        return account(sent, edge.chat.counter, edge.config.prices, edge.counterfactuals)


async def send_error(send: Send, err: ProxyError, headers: Sequence[tuple[bytes, bytes]]) -> None:
    body = err.body()
    length = (b"content-length", str(len(body)).encode())
    start_headers = [*JSON_HEADERS, length, *err.headers, *headers]
    await send({"type": "http.response.start", "status": err.status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
