"""The chat-completions path: parse, route, curate, and build what goes upstream.

Fail-open lives here, in one place: a body the proxy cannot read, or a curator that
raises, sends the client's exact bytes upstream with `x-curator-skipped: <reason>`. The
only curation outcome that fails a request is a policy's `on_overflow: reject`.

A route's mode decides what curation may do. `enforce` sends the curated request.
`shadow` runs the chain and reports what it would have done (headers, record), but sends
the client's exact bytes and never rejects. `off` only routes: nothing is counted.

Planning is plain synchronous code. Small bodies are planned on the event loop; big
ones in a worker thread while other requests are in flight, because a cold 127k-token
request spends tens of milliseconds in tiktoken (which releases the GIL) and the loop
must keep relaying those. Alone, a big body is planned on the loop too: there is nothing
to keep moving, and the loop's thread encodes fastest. An encoding's regex keeps its
caches in a pool with a lock-free path for one thread only, the first that encoded with
it (in `curator serve`, the event loop's): measured here, 19.5 ms vs 28 ms for the same
700 KB on any other thread, whichever thread loaded the encoding.
Measured here: to_thread costs ~0.1 ms; a 64 KiB body costs ~2 ms cold, ~0.2 ms warm.
A chain holding an async curator (a summarizer) is read the same way, then awaited on
the event loop, its model calls going through the services the app supplies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import orjson

from policies.base import Action
from policies.chain import CurationResult
from policies.errors import ContextOverflow
from policies.messages import Message
from policies.summary_io import Services, SummaryStats
from policies.tokens import TokenCounter
from proxy.config.limits import check_chat
from proxy.config.loader import Config, Mode, Route
from proxy.errors import context_length_exceeded, no_route
from proxy.serving.guard import Inflight
from proxy.serving.headers import MODE_HEADER, ascii_bytes, curated_headers, policy_headers
from proxy.serving.routing import PolicyChoice, Router

log = logging.getLogger("curator.chat")

CHAT_PATH = "/v1/chat/completions"
WOULD_REJECT = "would_reject"
"""Skip reason in shadow mode when the policy would have answered 400 (on_overflow: reject)."""
CURATED_EMPTY = "curated_empty"
"""Skip reason when curation left no message at all (e.g. it dropped a lone stray result):
OpenAI rejects `messages: []`, so the client's request goes as it was sent."""
OFFLOAD_BYTES = 64 * 1024
"""Bodies at least this big are planned in a worker thread (see the module docstring)."""


@dataclass(slots=True)  # not frozen: built on every request, and freezing costs ~1 us
class ChatPlan:
    """What goes upstream for one chat request, and what curation did to it."""

    route: Route
    body: bytes
    """The client's exact bytes, unless curation changed `messages`."""
    headers: tuple[tuple[bytes, bytes], ...]
    """The `x-curator-*` response headers (the request id is added by the app)."""
    model: str | None = None
    policy: str | None = None
    skipped: str | None = None
    parsed: Mapping[str, Any] | None = None
    original: Sequence[Message] | None = None
    curated: Sequence[Message] | None = None
    actions: tuple[Action, ...] = ()
    tokens_before: int | None = None
    tokens_after: int | None = None
    curation_s: float | None = None
    """Time spent curating, model calls of a summarizer included."""
    summary: SummaryStats | None = None
    """What summarizers did (async chains only)."""
    mode: Mode = "enforce"
    """In `shadow`, `curated`, `actions` and `tokens_after` are what enforce would send."""


ServicesFor = Callable[[Route], Services]
"""Builds the summarizer services for a request going to this route (the app supplies it)."""


@dataclass(slots=True)
class ChatRequest:
    """A readable chat request, routed, with its policy chosen; not yet curated."""

    raw: bytes
    parsed: dict[str, Any]
    messages: list[Message]
    model: str | None
    route: Route
    choice: PolicyChoice


@dataclass(frozen=True, slots=True)
class ChatSetup:
    """What planning needs from the app: its config, counter, and loaded tokenizers."""

    config: Config
    counter: TokenCounter
    loaded: set[str] = field(default_factory=set)
    """Encodings already loaded; a request needing another loads it off the event loop."""
    inflight: Inflight | None = None
    """The worker's in-flight count (None: unknown, so big bodies always go to a thread)."""
    router: Router = field(init=False)
    """The config's routes and policies, memoized."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "router", Router(self.config.routes, self.config.policies))


async def plan_chat(
    raw: bytes,
    path: str,
    headers: Mapping[str, str],
    setup: ChatSetup,
    services_for: ServicesFor | None = None,
) -> ChatPlan:
    """Plan a chat request: in a worker thread when the body is big, awaiting the model
    calls of an async chain (a summarizer) on the event loop.

    Raises `ProxyError` for no matching route and for `on_overflow: reject`.
    """
    counter = setup.counter
    alone = setup.inflight is not None and setup.inflight.count <= 1
    if len(raw) >= OFFLOAD_BYTES and not alone:
        planned = await asyncio.to_thread(plan_sync, raw, path, headers, setup, None)
    else:
        planned = plan_sync(raw, path, headers, setup, setup.loaded)
    if isinstance(planned, ChatPlan):
        return planned
    model = planned.model or ""
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
        policy = planned.choice.policy
        result = await policy.acurate(planned.messages, planned.parsed, counter, services=services)
        body = _body(planned, result)
    except Exception as exc:
        return _reject_or_fail_open(planned, exc)
    if not result.messages:
        return _skip(planned, CURATED_EMPTY)
    summary = services.stats if services is not None else None
    return _curated(planned, result, body, started, summary)


def plan_sync(
    raw: bytes,
    path: str,
    headers: Mapping[str, str],
    setup: ChatSetup,
    loaded: Container[str] | None,
) -> ChatPlan | ChatRequest:
    """The whole plan; or the request still to be curated when its chain is async, or
    when its tokenizer is not among `loaded` (None: any tokenizer may load here)."""
    request = read_request(raw, path, headers, setup)
    if isinstance(request, ChatPlan) or request.choice.policy.is_async:
        return request
    if loaded is not None and setup.counter.encoding_name(request.model or "") not in loaded:
        return request
    return curate(request, setup.counter)


def curate(request: ChatRequest, counter: TokenCounter) -> ChatPlan:
    """Run a sync chain; fail open on a curator error, 400 on `on_overflow: reject`."""
    started = perf_counter()
    try:
        result = _run_chain(request, counter)
        body = _body(request, result)
    except Exception as exc:
        return _reject_or_fail_open(request, exc)
    if not result.messages:
        return _skip(request, CURATED_EMPTY)
    return _curated(request, result, body, started, None)


def read_request(
    raw: bytes, path: str, headers: Mapping[str, str], setup: ChatSetup
) -> ChatPlan | ChatRequest:
    """Parse and route; a body that cannot be curated comes back as a skipped plan."""
    parsed, problem = parse_chat(raw)
    check_chat(raw, parsed, setup.config.server.limits)
    model = parsed.get("model") if parsed is not None else None
    model = model if isinstance(model, str) else None
    route = setup.router.route(path, model, headers)
    if route is None:
        raise no_route()
    if route.mode == "off":
        return _off(route, raw, model, parsed)
    choice = setup.router.policy(route, headers)
    if parsed is None or problem is not None:
        return _skipped(route, raw, problem or "invalid_json", model, choice, parsed)
    return ChatRequest(raw, parsed, parsed["messages"], model, route, choice)


def _run_chain(request: ChatRequest, counter: TokenCounter) -> CurationResult:
    policy = request.choice.policy
    if policy.chain.curators:
        return policy.curate(request.messages, request.parsed, counter)
    # An empty chain (passthrough) changes nothing, so only the count is needed; skipping
    # the budget (tool definitions, window lookup) saves a measurable share per request.
    tokens = counter.count_messages(request.messages, request.model or "")
    return CurationResult(request.messages, (), tokens, tokens)


def _reject_or_fail_open(request: ChatRequest, exc: Exception) -> ChatPlan:
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


def _curated(
    request: ChatRequest,
    result: CurationResult,
    body: bytes,
    started: float,
    summary: SummaryStats | None,
) -> ChatPlan:
    return ChatPlan(
        route=request.route,
        body=body,
        headers=curated_headers(request.route, request.choice, result),
        model=request.model,
        policy=request.choice.name,
        parsed=request.parsed,
        original=request.messages,
        curated=result.messages if result.changed else request.messages,
        actions=result.actions,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        curation_s=perf_counter() - started,
        summary=summary,
        mode=request.route.mode,
    )


def parse_chat(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The parsed body and None, or what is wrong with it (a skip reason)."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, "invalid_json"
    if not isinstance(parsed, dict):
        return None, "not_an_object"
    messages = parsed.get("messages")
    if not isinstance(messages, list) or not messages:
        return parsed, "no_messages"
    for msg in messages:  # a plain loop: this runs on every request
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            return parsed, "bad_messages"
    return parsed, None


def _body(request: ChatRequest, result: CurationResult) -> bytes:
    if not result.changed or request.route.mode == "shadow":
        return request.raw
    # Only `messages` is replaced; unpacking keeps every other key's value and order.
    return orjson.dumps({**request.parsed, "messages": result.messages})


def _skipped(
    route: Route,
    raw: bytes,
    reason: str,
    model: str | None,
    choice: PolicyChoice,
    parsed: Mapping[str, Any] | None,
) -> ChatPlan:
    headers = policy_headers(route, choice)
    headers.append((b"x-curator-skipped", reason.encode()))
    return ChatPlan(
        route=route,
        body=raw,
        headers=tuple(headers),
        model=model,
        policy=choice.name,
        skipped=reason,
        parsed=parsed,
        mode=route.mode,
    )


def _skip(request: ChatRequest, reason: str) -> ChatPlan:
    r = request
    return _skipped(r.route, r.raw, reason, r.model, r.choice, r.parsed)


def _off(route: Route, raw: bytes, model: str | None, parsed: Mapping[str, Any] | None) -> ChatPlan:
    """Routed only: no policy applies, nothing is counted, the client's bytes go upstream."""
    headers = ((b"x-curator-route", ascii_bytes(route.name)), (MODE_HEADER, b"off"))
    return ChatPlan(route=route, body=raw, headers=headers, model=model, parsed=parsed, mode="off")
