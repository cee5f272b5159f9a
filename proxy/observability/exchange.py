"""One record per proxied request, handed to observers (audit log, metrics) when it ends.

Records are built only when the app has observers, and they hold references to the
request's message lists rather than copies, so a proxy without observers pays nothing.
What only the audit log needs (the relayed body, the summarizer's model calls) is
collected only while the audit log is on.
Observers run on the event loop right after the exchange: they must be quick (enqueue,
increment) and must not mutate what they are given.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from policies.base import Action
from policies.messages import Message
from policies.summary_io import Complete, Completion, SummaryRequest, SummaryStats
from proxy.observability.audit.sse import SSEAccumulator
from proxy.observability.usage.spend import Spend

log = logging.getLogger("curator.record")

Outcome = Literal["ok", "client_disconnect", "upstream_error", "proxy_error"]
"""ok: the upstream's response was relayed in full (whatever its status).
client_disconnect: the client left before the response ended; the upstream was closed.
upstream_error: the upstream failed (before or during the response).
proxy_error: the proxy answered with its own error (no route, too large, overflow reject).
"""


def new_id() -> str:
    """A request id: 32 hex digits, the first 12 the time in milliseconds (as in UUIDv7),
    the rest 80 random bits. Ids sort by time, so the audit store's id index grows at
    its end instead of at a random page per record (measured: ~2x cheaper inserts).

    Ids name records; they grant nothing, so they need not be unguessable: `random` (no
    system call) rather than os.urandom, which releases the GIL and, with the audit
    thread busy, can leave the event loop waiting for it."""
    stamp = time.time_ns() // 1_000_000
    return (stamp << 80 | random.getrandbits(80)).to_bytes(16, "big").hex()  # 2x an f-string


@dataclass(slots=True)  # not frozen: one per request, and freezing 27 fields costs ~2 us
class ExchangeRecord:
    """What happened to one request: routing, curation, the upstream's answer, timings."""

    id: str
    started_at: float
    """Wall-clock time (epoch seconds) the request arrived."""
    method: str
    path: str
    route: str | None
    upstream: str | None
    policy: str | None
    model: str | None
    skipped: str | None
    """Why curation was skipped (`x-curator-skipped`), None when it ran or did not apply."""
    body: Mapping[str, Any] | None
    """The parsed chat request as the client sent it (a reference)."""
    original: Sequence[Message] | None
    curated: Sequence[Message] | None
    """What the model saw; the same list as `original` when nothing changed."""
    actions: tuple[Action, ...]
    tokens_before: int | None
    tokens_after: int | None
    curation_s: float | None
    """Time spent curating, a summarizer's model calls included."""
    summary: SummaryStats | None
    """What summarizers did (calls, cache hits, failures, tokens); None without one."""
    status: int | None
    """The status the client received; None when it left before any response."""
    upstream_status: int | None
    latency_s: float
    ttfb_s: float | None
    """Seconds until the first response body byte came from upstream."""
    outcome: Outcome
    error: str | None = None
    """The proxy's error code (`upstream_timeout`, ...) when it answered or ended a stream."""
    mode: str | None = None
    """The route's mode for a chat completion (enforce, shadow or off; None on other paths).
    In shadow, `curated`, `actions` and `tokens_after` are what enforce would have sent."""
    authorization: str | None = field(default=None, repr=False)
    """The client's Authorization (or api-key) value, for the audit log's key fingerprint.
    Never log or store it; the audit writer keeps only its hash."""
    response: SSEAccumulator | None = None
    """The relayed response body, collected only when the audit log wants it."""
    incomplete: str | None = None
    """Why the client got no complete response (`Relay.incomplete`): the upstream's error
    code mid-response, `client_disconnect` or `shutdown`; None when it was complete."""
    summary_calls: tuple[SummaryCall, ...] = ()
    """The summarizer's model calls for this request (collected only for the audit log)."""
    spend: Spend | None = None
    """A chat request's usage, cost and uncurated counterfactual (`proxy.observability.usage`)."""


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """One model call a summarizer made while curating a request."""

    started_at: float
    """Wall-clock time (epoch seconds) the call started."""
    messages: list[Message]
    request: SummaryRequest
    completion: Completion | None
    """None when the call failed."""
    error: BaseException | None
    latency_s: float


def recording(complete: Complete, calls: list[SummaryCall]) -> Complete:
    """`complete`, appending a `SummaryCall` to `calls` for every call it makes."""

    async def record(messages: list[Message], request: SummaryRequest) -> Completion:
        started_at, started = time.time(), time.perf_counter()
        try:
            completion = await complete(messages, request)
        except BaseException as exc:  # a summarizer's timeout arrives as a cancellation
            latency = time.perf_counter() - started
            calls.append(SummaryCall(started_at, messages, request, None, exc, latency))
            raise
        latency = time.perf_counter() - started
        calls.append(SummaryCall(started_at, messages, request, completion, None, latency))
        return completion

    return record


Observer = Callable[[ExchangeRecord], None]


def notify(observers: Sequence[Observer], record: ExchangeRecord) -> None:
    """Call every observer; one that fails is logged and never affects the others."""
    for observer in observers:
        try:
            observer(record)
        except Exception:  # an audit or metrics bug must not break proxying
            log.exception("exchange observer %r failed on request %s", observer, record.id)
