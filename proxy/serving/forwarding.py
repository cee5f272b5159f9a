"""One `/v1/*` request's journey: read the body, plan it (curating when a protocol knows its
path), forward it through the relay, and note everything in its `ExchangeRecord`, which the
metrics and the audit read once it is done (`proxy.observability.observers`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from time import perf_counter

from policies.messages import Message
from policies.summary_io import Services
from proxy.config.loader import Route as ConfigRoute
from proxy.curation.plan import Plan, plan
from proxy.curation.rescue import Overflow, RescuingClient, retry_request
from proxy.errors import JSON_HEADERS, ErrorStyle, ProxyError, no_anthropic_upstream, no_route
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.exchange import (
    ExchangeRecord,
    SummaryCall,
    new_id,
    notify,
    recording,
)
from proxy.observability.usage.spend import Sent, Spend, account
from proxy.observability.usage.tap import from_wire
from proxy.protocols import protocol_for
from proxy.protocols.base import Usage
from proxy.protocols.vendor import vendor_of
from proxy.serving.edge import Edge
from proxy.serving.guard import PROXY_CREDENTIAL
from proxy.serving.incoming import (
    ClientGone,
    client_credential,
    has_header,
    header_map,
    read_body,
    sniff_model,
)
from proxy.serving.paths import checked_target
from proxy.serving.routing import POLICY_HEADER_RAW
from proxy.types import Receive, Scope, Send
from proxy.upstream.client import UpstreamClient, UpstreamRequest
from proxy.upstream.facts import learn, sent_tokens
from proxy.upstream.hygiene import request_headers, upstream_url
from proxy.upstream.relay import Relay, forward

log = logging.getLogger("curator.app")
MIN_CACHEABLE = 768
"""No provider caches a prompt under 1,024 tokens; a quarter off for our count's error (an
estimate, for Claude). Without a count, the body's bytes stand in: a token takes one or more."""


async def proxy_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """Forward one `/v1/*` request (curating it when a protocol knows its path) and record it."""
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
            notify(edge.observers, exchange.finish())
        elif exchange.record.protocol is not None and edge.curation.facts is not None:
            exchange.finish()  # the calibration learns from the usage even when unobserved


class _Exchange:
    """One request's journey, noted in its `ExchangeRecord` as it goes."""

    __slots__ = (
        "edge",
        "headers",
        "planned",
        "record",
        "relay",
        "scope",
        "started",
        "summary_calls",
        "vendor",
    )

    def __init__(self, scope: Scope, edge: Edge) -> None:
        self.scope = scope
        self.edge = edge
        self.started = perf_counter()
        self.record = ExchangeRecord(new_id(), time.time(), scope["method"], scope["path"])
        if edge.tracing is not None:
            self.record.trace = edge.tracing.start(scope["headers"])
        self.relay = Relay(self.record.id)
        self.vendor = vendor_of(scope["path"], scope["headers"])
        self.relay.error_style = self.vendor
        self.headers: list[tuple[bytes, bytes]] = [
            (b"x-curator-request-id", self.record.id.encode())
        ]
        """The x-curator-* response headers, on success and on the proxy's own errors."""
        self.summary_calls: list[SummaryCall] = []
        self.planned: Plan | None = None

    async def run(self, receive: Receive, send: Send) -> None:
        record, relay, edge = self.record, self.relay, self.edge
        try:
            target = checked_target(self.scope)  # before the body: nothing to read for
            request = await self._prepare(await read_body(receive, edge.max_body_bytes), target)
            client = self._rescuing(request)
            self.planned = None  # the rescue holds it while it may need it, no longer
            await forward(client, request, receive, send, self.headers, relay, edge.loop)
            record.status, record.outcome, record.error = relay.status, relay.outcome, relay.error
        except ClientGone:
            record.outcome = "client_disconnect"
        except ProxyError as err:
            record.outcome = "upstream_error" if err.status in (502, 504) else "proxy_error"
            record.status, record.error = err.status, err.code
            await send_error(send, err, self.headers, self.vendor)
        except BaseException:
            record.outcome = "upstream_error" if relay.status else "proxy_error"
            record.status, record.error = relay.status, relay.error
            raise

    async def _prepare(self, body: bytes, target: bytes) -> UpstreamRequest:
        edge, scope, record = self.edge, self.scope, self.record
        record.request_bytes = len(body)
        protocol = protocol_for(record.method, record.path)
        if protocol is not None:
            # A Messages request's `anthropic-beta` may ask for the 1M window.
            wanted = (
                edge.route_by_headers
                or protocol.vendor == "anthropic"
                or has_header(scope["headers"], POLICY_HEADER_RAW)
            )
            headers = header_map(scope["headers"]) if wanted else {}
            planned = await plan(protocol, body, headers, edge.curation, record, self._services_for)
            self.planned = planned
            route, body = planned.route, planned.body
            self.headers.extend(planned.headers)
            learning = edge.curation.facts is not None
            if (edge.observers or learning) and record.mode != "off":
                self.relay.keep_tail = True  # for the usage the upstream reports
                if edge.config.audit.enabled:
                    record.response = self.relay.tap = BodyCapture()
                    self.relay.tap_errors_only = not edge.config.audit.store_responses
        else:
            headers = header_map(scope["headers"]) if edge.route_by_headers else {}
            model = sniff_model(body) if edge.route_by_model else None
            found = edge.curation.router.route(record.path, model, headers, self.vendor)
            if found is None:
                raise no_anthropic_upstream() if self.vendor == "anthropic" else no_route()
            route = found
        record.route = route.name
        upstream = edge.config.upstreams[route.upstream]
        record.upstream = upstream.name
        sent = request_headers(scope["headers"], upstream.authorization, upstream.kind)
        if record.trace is not None:
            sent = record.trace.carry(sent, upstream.base_url)
        return UpstreamRequest(
            method=record.method,
            url=upstream_url(upstream.api_base, target, scope["query_string"]),
            headers=sent,
            body=body,
            connect_timeout_s=upstream.connect_timeout_s,
            read_timeout_s=upstream.read_timeout_s,
        )

    def _rescuing(self, request: UpstreamRequest) -> UpstreamClient:
        """The upstream client; for a request curated in enforce mode whose policy says
        `on_upstream_overflow: retry`, one that rescues a context-length 400."""
        planned, client = self.planned, self.edge.client
        pending = planned.pending if planned is not None else None
        if planned is None or pending is None:
            return client
        policy = pending.choice.policy
        if policy.on_upstream_overflow != "retry":
            return client

        async def retry(overflow: Overflow, error: bytes) -> UpstreamRequest | None:
            services = self._services_for(pending.route) if policy.is_async else None
            return await retry_request(
                overflow,
                error,
                planned=planned,
                request=request,
                setup=self.edge.curation,
                services=services,
                headers=self.headers,
            )

        return RescuingClient(client, retry)

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
        if not edge.config.audit.enabled and self.record.trace is None:
            return services
        # Each model call gets its own audit record and span, linked to this request.
        return replace(services, complete=recording(services.complete, self.summary_calls))

    def _credential(self) -> str | None:
        """The client's credential, for the audit log's fingerprint (nothing else reads it)."""
        if self.record.protocol is None or not self.edge.config.audit.enabled:
            return None
        proxy_key: bytes | None = self.scope.get(PROXY_CREDENTIAL)
        if proxy_key is not None:  # the guard took the client's credential headers out
            return proxy_key.decode("latin-1")
        return client_credential(self.scope["headers"])

    def finish(self) -> ExchangeRecord:
        """The record, completed with what only the end of the exchange knows."""
        record, relay = self.record, self.relay
        record.upstream_status = relay.status
        record.latency_s = perf_counter() - self.started
        if relay.first_byte_at is not None:
            record.ttfb_s = relay.first_byte_at - self.started
        if relay.tap is None:  # dropped by the relay: a success the audit does not store
            record.response = None
        record.tail = relay.tail()
        usage = record.usage()  # read once: the calibration and the spend both need it
        passthrough = self._passthrough()
        if self.edge.curation.facts is not None and relay.complete and not passthrough:
            learn(self.edge.curation.facts, record, self.edge.curation.counter, usage)
        record.incomplete = relay.incomplete
        record.authorization = self._credential()
        record.summary_calls = tuple(self.summary_calls)
        record.spend = self._spend(passthrough, usage)
        return record

    def _passthrough(self) -> bool:
        """Whether the request's policy has no curator: what it sends is what the client sent,
        so there is no budget to calibrate, and the uncurated cost is the actual one."""
        policy = self.edge.config.policies.get(self.record.policy or "")
        return policy is None or not policy.chain.curators

    def _spend(self, passthrough: bool, usage: Usage | None) -> Spend | None:
        """Usage, cost and counterfactual of an observed request a protocol read (the relay
        kept its tail)."""
        record, edge = self.record, self.edge
        if record.protocol is None or not self.relay.keep_tail:
            return None
        headers = self.scope["headers"]
        measured = (record.keys, record.counts, _counted_sent(record), _upstream(record))
        # A passthrough's uncurated cost is the actual one; its cache attribution (~75 us of
        # CPU a request, a quarter of a small passthrough's) is worked out where an audit
        # record will hold it, not for the metric alone, and only for a prompt that could be
        # cached at all.
        size = record.tokens_before if record.tokens_before is not None else record.request_bytes
        attributed = not passthrough or (edge.config.audit.enabled and (size or 0) >= MIN_CACHEABLE)
        original = record.original if attributed else None  # None: uncurated = actual
        sent = Sent.of(
            record.model,
            record.facts,
            original,
            headers,
            from_wire(usage),
            *measured,
            passthrough=passthrough,
        )
        now = record.small()  # at once: cheaper than handing it to a thread
        return account(sent, edge.curation.counter, edge.config.prices, edge.counterfactuals, now)


def _upstream(record: ExchangeRecord) -> Sequence[Message] | None:
    """The messages that went upstream when they are not the client's (None: they are)."""
    if record.mode == "shadow" or record.curated is record.original:
        return None
    return record.curated


def _counted_sent(record: ExchangeRecord) -> int | None:
    """Our count of the prompt that went upstream (the client's own in shadow)."""
    counted = record.tokens_before if record.mode == "shadow" else record.tokens_after
    return None if counted is None else sent_tokens(counted, record)


async def send_error(
    send: Send,
    err: ProxyError,
    headers: Sequence[tuple[bytes, bytes]],
    style: ErrorStyle = "openai",
) -> None:
    body = err.body(style)
    length = (b"content-length", str(len(body)).encode())
    start_headers = [*JSON_HEADERS, length, *err.headers, *headers]
    await send({"type": "http.response.start", "status": err.status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
