"""A curated request's path: parse (its protocol), route, curate, build what goes upstream.

Fail-open lives here, in one place: a body the proxy cannot read, or a curator that
raises, sends the client's exact bytes upstream with `x-curator-skipped: <reason>`. The
only curation outcome that fails a request is a policy's `on_overflow: reject`.

A route's mode decides what curation may do. `enforce` sends the curated request.
`shadow` runs the chain and reports what it would have done (headers, record), but sends
the client's exact bytes and never rejects. `off` only routes: nothing is counted.

Planning is plain synchronous code. Small bodies are planned on the event loop; big ones
(`OFFLOAD_BYTES`) always in the worker's one curation thread (`CurationSetup.offload`),
even when nothing else is in flight: a cold 127k-token request spends tens of milliseconds
curating, and a small turn arriving meanwhile must not wait behind it (issue N: no loop
stall over 5 ms; `curator_event_loop_lag_seconds` shows it). One thread, not a pool: big
bodies queue behind each other rather than take turns at the GIL with the loop. Measured
here: a hand-off costs ~0.1 ms; a 64 KiB body costs ~2 ms cold, ~0.2 ms warm. A chain
holding an async curator (a summarizer) is read the same way, then awaited on the loop.

What curation did goes into the request's `ExchangeRecord` (read by the metrics and the
audit); the `Plan` says only what goes upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter

from policies.calibration import NEUTRAL, BudgetHints
from policies.chain import CurationResult
from policies.errors import ContextOverflow
from policies.summary_io import Services, SummaryStats
from policies.tokens import REPLY_PRIMING, TokenCounter
from proxy.config.loader import Config, Route
from proxy.curation.provider_edits import left_to_provider
from proxy.curation.sharing import SharedTools
from proxy.curation.thread import CurationThread, in_thread
from proxy.errors import context_length_exceeded, no_anthropic_upstream, no_route
from proxy.observability.exchange import BIG_BYTES, ExchangeRecord
from proxy.protocols.base import WireProtocol, WireRequest
from proxy.serving.headers import MODE_HEADER, ascii_bytes, curated_headers, policy_headers
from proxy.serving.routing import PolicyChoice, Router
from proxy.upstream.facts import ASSUMED, WINDOW_HEADER, UpstreamFacts

log = logging.getLogger("curator.chat")  # the name users filter on; kept

WOULD_REJECT = "would_reject"
"""Skip reason in shadow mode when the policy would have answered 400 (on_overflow: reject)."""
CURATED_EMPTY = "curated_empty"
"""Skip reason when curation left no message at all (e.g. it dropped a lone stray result):
OpenAI rejects `messages: []`, so the client's request goes as it was sent."""
OFFLOAD_BYTES = BIG_BYTES
"""Bodies at least this big are planned in a worker thread (see the module docstring): the
size at which the audit, too, calls an exchange big."""


@dataclass(slots=True)  # not frozen: built on every request, and freezing costs ~1 us
class Plan:
    """What goes upstream for one curated request."""

    route: Route
    body: bytes
    """The client's exact bytes, unless curation changed the messages."""
    headers: tuple[tuple[bytes, bytes], ...]
    """The `x-curator-*` response headers (the request id is added by the app)."""
    pending: Pending | None = None
    """A request curated in enforce mode, kept so an upstream overflow can be rescued
    (`proxy.curation.replan`); None otherwise."""


ServicesFor = Callable[[Route], Services]
"""Builds the summarizer services for a request going to this route (the app supplies it)."""


@dataclass(slots=True)
class Pending:
    """A readable request, routed, with its policy chosen; not yet curated."""

    protocol: WireProtocol
    wire: WireRequest
    route: Route
    choice: PolicyChoice
    record: ExchangeRecord
    hints: BudgetHints = NEUTRAL
    """What the upstream told us: its window for the model, its calibration."""
    window_assumed: bool = False


@dataclass(frozen=True, slots=True)
class CurationSetup:
    """What planning needs from the app: its config, counter, and loaded tokenizers."""

    config: Config
    counter: TokenCounter
    loaded: set[str] = field(default_factory=set)
    """Encodings already loaded; a request needing another loads it off the event loop."""
    offload: CurationThread | None = None
    """Where big bodies are planned: the worker's one curation thread (None: asyncio's
    default executor)."""
    facts: UpstreamFacts | None = None
    """Upstream windows and calibration (None: the budget uses the tables alone)."""
    tools: SharedTools = field(default_factory=SharedTools)
    """The tools lists seen recently, shared between equal ones."""
    router: Router = field(init=False)
    """The config's routes and policies, memoized."""

    def __post_init__(self) -> None:
        kinds = {name: up.kind for name, up in self.config.upstreams.items()}
        router = Router(self.config.routes, self.config.policies, kinds=kinds)
        object.__setattr__(self, "router", router)


async def plan(
    protocol: WireProtocol,
    raw: bytes,
    headers: Mapping[str, str],
    setup: CurationSetup,
    record: ExchangeRecord,
    services_for: ServicesFor | None = None,
) -> Plan:
    """Plan a request `protocol` curates (`record.path`), noting in `record` what curation
    did: in a worker thread when the body is big, awaiting the model calls of an async
    chain (a summarizer) on the event loop.

    Raises `ProxyError` for no matching route and for `on_overflow: reject`.
    """
    counter = setup.counter
    if len(raw) >= OFFLOAD_BYTES:
        job = partial(plan_sync, protocol, raw, headers, setup, record, None)
        planned = await (setup.offload.run(job) if setup.offload else in_thread(None, job))
    else:
        planned = plan_sync(protocol, raw, headers, setup, record, setup.loaded)
    if isinstance(planned, Plan):
        return planned
    model = planned.wire.model or ""
    encoding = counter.encoding_name(model)
    if encoding not in setup.loaded:
        # The first request for this tokenizer loads it (~0.2 s), never on the loop.
        await asyncio.to_thread(counter.encoder, model)
        setup.loaded.add(encoding)
    if not planned.choice.policy.is_async:
        return curate(planned, counter)
    services = services_for(planned.route) if services_for is not None else None
    started = perf_counter()
    try:
        policy, wire = planned.choice.policy, planned.wire
        result = await policy.acurate(
            wire.messages, wire.facts, counter, services=services, hints=planned.hints
        )
        body = rebuilt_body(planned, result)
    except Exception as exc:
        return _reject_or_fail_open(planned, exc)
    if not result.messages:
        return _skip(planned, CURATED_EMPTY)
    summary = services.stats if services is not None else None
    return curated_plan(planned, result, body, started, summary)


def plan_sync(
    protocol: WireProtocol,
    raw: bytes,
    headers: Mapping[str, str],
    setup: CurationSetup,
    record: ExchangeRecord,
    loaded: Container[str] | None,
) -> Plan | Pending:
    """The whole plan; or the request still to be curated when its chain is async, or
    when its tokenizer is not among `loaded` (None: any tokenizer may load here)."""
    request = read_request(protocol, raw, headers, setup, record)
    if isinstance(request, Plan) or request.choice.policy.is_async:
        return request
    if loaded is not None and setup.counter.encoding_name(request.wire.model or "") not in loaded:
        return request
    return curate(request, setup.counter)


def curate(request: Pending, counter: TokenCounter) -> Plan:
    """Run a sync chain; fail open on a curator error, 400 on `on_overflow: reject`."""
    started = perf_counter()
    try:
        result = _run_chain(request, counter)
        body = rebuilt_body(request, result)
    except Exception as exc:
        return _reject_or_fail_open(request, exc)
    if not result.messages:
        return _skip(request, CURATED_EMPTY)
    return curated_plan(request, result, body, started, None)


def read_request(
    protocol: WireProtocol,
    raw: bytes,
    headers: Mapping[str, str],
    setup: CurationSetup,
    record: ExchangeRecord,
) -> Plan | Pending:
    """Parse and route; a body that cannot be curated comes back as a skipped plan."""
    wire = protocol.parse(raw, setup.config.server.limits)
    if type(wire.body) is dict:
        setup.tools.share(wire.body)
    if wire.facts is not wire.body and type(wire.facts) is dict:  # Responses' chat-shaped view
        setup.tools.share(wire.facts)
    route = setup.router.route(record.path, wire.model, headers, protocol.vendor)
    if route is None:
        raise no_anthropic_upstream() if protocol.vendor == "anthropic" else no_route()
    record.protocol, record.mode, record.model, record.body, record.facts = (
        protocol,
        route.mode,
        wire.model,
        wire.body,
        wire.facts,
    )
    if route.mode == "off":
        # Routed only: no policy applies, nothing is counted, the client's bytes go upstream.
        headers_off = ((b"x-curator-route", ascii_bytes(route.name)), (MODE_HEADER, b"off"))
        return Plan(route, raw, headers_off)
    choice = left_to_provider(setup.router.policy(route, headers), protocol.vendor, wire.body)
    record.policy = choice.name
    pending = Pending(protocol, wire, route, choice, record)
    if wire.body is None or wire.skip is not None:
        return _skip(pending, wire.skip or "invalid_json")
    if setup.facts is not None and choice.policy.chain.curators:  # else no budget is made
        model, facts, claude = wire.model or "", setup.facts, protocol.vendor == "anthropic"
        pending.hints = hints = facts.hints(route.upstream, model, headers if claude else None)
        models = setup.counter.models
        pending.window_assumed = facts.assumed(route.upstream, model, choice.policy, models, hints)
    return pending


def _run_chain(request: Pending, counter: TokenCounter) -> CurationResult:
    policy, wire = request.choice.policy, request.wire
    if policy.chain.curators:
        return policy.curate(wire.messages, wire.facts, counter, hints=request.hints)
    # An empty chain (passthrough) changes nothing, so only the count is needed; skipping
    # the budget (tool definitions, window lookup) saves a measurable share per request.
    messages = wire.messages
    keys, counts = counter.measure(messages, wire.model or "")
    tokens = sum(counts) + REPLY_PRIMING
    listed = messages if isinstance(messages, list) else list(messages)
    return CurationResult(listed, (), tokens, tokens, tuple(keys), tuple(counts))


def _reject_or_fail_open(request: Pending, exc: Exception) -> Plan:
    if isinstance(exc, ContextOverflow):
        if request.route.mode == "shadow":
            return _skip(request, WOULD_REJECT)
        raise context_length_exceeded(str(exc)) from exc
    # Fail-open: a curator bug must never fail the request.
    log.error(
        "curation failed on route %s (policy %s); forwarding the request unchanged",
        request.route.name,
        request.choice.name,
        exc_info=exc,
    )
    return _skip(request, "curator_error")


def curated_plan(
    request: Pending,
    result: CurationResult,
    body: bytes,
    started: float,
    summary: SummaryStats | None,
) -> Plan:
    record, original = request.record, request.wire.messages
    record.original = original
    # The keys are the counter's for the model the budget read: the record's, when a string.
    if request.wire.model is not None:
        record.keys, record.counts = result.keys, result.counts
    record.curated = result.messages if result.changed else original
    record.actions, record.tools_tokens = result.actions, result.tools_tokens
    record.tokens_before, record.tokens_after = result.tokens_before, result.tokens_after
    record.curation_s = perf_counter() - started
    record.curation_started = started
    record.summary = summary
    headers = curated_headers(request.route, request.choice, result)
    if request.window_assumed:
        headers = (*headers, (WINDOW_HEADER, ASSUMED))
    rescuable = request.route.mode == "enforce" and bool(request.choice.policy.chain.curators)
    return Plan(request.route, body, headers, request if rescuable else None)


def rebuilt_body(request: Pending, result: CurationResult) -> bytes:
    if not result.changed or request.route.mode == "shadow":
        return request.wire.raw
    return request.protocol.rebuild(request.wire, result.messages)


def _skip(request: Pending, reason: str) -> Plan:
    """The client's bytes go upstream, with `x-curator-skipped: <reason>`."""
    record = request.record
    record.skip_reason = reason
    record.original = request.wire.messages
    headers = policy_headers(request.route, request.choice)
    headers.append((b"x-curator-skipped", reason.encode()))
    return Plan(request.route, request.wire.raw, tuple(headers))
