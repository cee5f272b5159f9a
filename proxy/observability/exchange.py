"""One record per proxied request: the request fills it as it goes (routing, curation, the
upstream's answer), and observers (metrics, the audit log) read it when it ends.

It holds references to the request's message lists rather than copies, so a proxy
without observers pays only for setting a few fields.
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
from typing import Any, Literal, Protocol

from policies.base import Action
from policies.messages import Message
from policies.summary_io import Complete, Completion, SummaryRequest, SummaryStats
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.usage.spend import Spend
from proxy.protocols.base import Usage, WireProtocol
from proxy.types import Outcome

log = logging.getLogger("curator.record")

SMALL_BYTES = 4096
"""An exchange this small (`ExchangeRecord.small`) has its bookkeeping done at once, on the
event loop: its spend's counterfactual (~20 us for a ~2 KB request), its audit record
(`proxy.observability.audit.building`)."""
BIG_BYTES = 64 * 1024
"""An exchange whose request is at least this big (`ExchangeRecord.big`) has its audit
record built at once in the writer's thread, not after its batch window: milliseconds of
work (~15-25 for a never-seen 127k-token history), better spent while the agent reads the
response than 20 ms later, beside the agent's next turn."""


def new_id() -> str:
    """A request id: 32 hex digits, the first 12 the time in milliseconds (as in UUIDv7),
    the rest 80 random bits. Ids sort by time, so the audit store's id index grows at
    its end instead of at a random page per record (measured: ~2x cheaper inserts).

    Ids name records; they grant nothing, so they need not be unguessable: `random` (no
    system call) rather than os.urandom, which releases the GIL and, with the audit
    thread busy, can leave the event loop waiting for it."""
    stamp = time.time_ns() // 1_000_000
    return (stamp << 80 | random.getrandbits(80)).to_bytes(16, "big").hex()  # 2x an f-string


@dataclass(slots=True)  # not frozen: filled as the request goes, and freezing costs ~2 us
class ExchangeRecord:
    """What happened to one request: routing, curation, the upstream's answer, timings.

    The app fills the exchange's fields, `proxy.curation` the curation's; the metrics and
    the audit log read it (the audit's redacted form is built from it once it ended).
    """

    id: str
    started_at: float
    """Wall-clock time (epoch seconds) the request arrived."""
    method: str
    path: str
    route: str | None = None
    upstream: str | None = None
    # -- curation: set when a protocol curates the request's path ----------------------
    protocol: WireProtocol | None = None
    """The protocol that read the request (its name is the audit record's `kind`)."""
    mode: str | None = None
    """The route's mode for a curated path (enforce, shadow or off; None on other paths).
    In shadow, `curated`, `actions` and `tokens_after` are what enforce would have sent."""
    policy: str | None = None
    model: str | None = None
    skip_reason: str | None = None
    """Why curation was skipped (`x-curator-skipped`), None when it ran or did not apply."""
    body: Mapping[str, Any] | None = None
    """The parsed request as the client sent it (a reference)."""
    request_bytes: int | None = None
    """The size of the request body as the client sent it; None for a model call the proxy
    made itself."""
    facts: Mapping[str, Any] | None = None
    """What the budget read of it, in chat-completions form (`WireRequest.facts`): tools
    and output limits, which the spend's counterfactual and the audit's budget fields keep."""
    original: Sequence[Message] | None = None
    """The messages as the client sent them, in the neutral form (as far as they could be
    read when curation was skipped)."""
    curated: Sequence[Message] | None = None
    """What the model saw; the same list as `original` when nothing changed."""
    keys: Sequence[bytes | None] = ()
    """Each of `original`'s messages' digest as the token counter keys it for `model`, when
    curation counted them: the audit's cache key and the spend's count, without hashing
    every message again."""
    counts: Sequence[int] = ()
    """Each of `original`'s messages' tokens, when curation counted them (with `keys`)."""
    actions: tuple[Action, ...] = ()
    tokens_before: int | None = None
    tokens_after: int | None = None
    tools_tokens: int = 0
    """The tool definitions' tokens, as the budget counted them (`CurationResult`)."""
    curation_s: float | None = None
    """Time spent curating, a summarizer's model calls included."""
    curation_started: float | None = None
    """`perf_counter()` when curating began (the trace's curation span starts there)."""
    summary: SummaryStats | None = None
    """What summarizers did (calls, cache hits, failures, tokens); None without one."""
    # -- the response ------------------------------------------------------------------
    status: int | None = None
    """The status the client received; None when it left before any response."""
    upstream_status: int | None = None
    latency_s: float = 0.0
    ttfb_s: float | None = None
    """Seconds until the first response body byte came from upstream."""
    outcome: Outcome = "ok"
    error: str | None = None
    """The proxy's error code (`upstream_timeout`, ...) when it answered or ended a stream."""
    authorization: str | None = field(default=None, repr=False)
    """The client's Authorization (or api-key) value, for the audit log's key fingerprint.
    Never log or store it; the audit writer keeps only its hash."""
    response: BodyCapture | bytes | str | None = None
    """The relayed response body, collected only when the audit log wants it (bytes or
    text for a call the proxy made itself)."""
    tail: bytes = b""
    """The response body's last bytes (observed exchanges of a curated path): see `usage`."""
    incomplete: str | None = None
    """Why the client got no complete response (`Relay.incomplete`): the upstream's error
    code mid-response, `client_disconnect` or `shutdown`; None when it was complete."""
    summary_calls: tuple[SummaryCall, ...] = ()
    """The summarizer's model calls for this request (collected only for the audit log)."""
    rescued: FirstAttempt | None = None
    """The attempt the upstream rejected as too long, when it was rescued (curated again
    and sent once more: `proxy.curation.rescue`); the fields above are the second one's."""
    spend: Spend | None = None
    """The request's usage, cost and uncurated counterfactual (`proxy.observability.usage`)."""
    parent_id: str | None = None
    """For a model call made on a request's behalf: that request's id."""
    subcall: Literal["summary", "rescued"] | None = None
    """What such a call was: a summarizer's, or the attempt an overflow rescue replaced
    (`rescued`); None for a client's request."""
    trace: Trace | None = None
    """The request's open span, when OpenTelemetry traces are on (`proxy.observability.otel`)."""

    def small(self) -> bool:
        """Whether the request and the response kept of it are `SMALL_BYTES` or fewer; False
        for a model call the proxy made itself."""
        if self.request_bytes is None:
            return False
        response = self.response
        kept = response.size if isinstance(response, BodyCapture) else len(response or "")
        return self.request_bytes + kept <= SMALL_BYTES

    def big(self) -> bool:
        """Whether the request is `BIG_BYTES` or more."""
        return self.request_bytes is not None and self.request_bytes >= BIG_BYTES

    def usage(self) -> Usage | None:
        """The token usage the upstream reported, read from `tail` by the protocol."""
        if self.protocol is None or not self.tail:
            return None
        return self.protocol.usage(self.tail)


@dataclass(frozen=True, slots=True)
class FirstAttempt:
    """A curated request the upstream answered 400 `context_length_exceeded`."""

    curated: Sequence[Message] | None
    actions: tuple[Action, ...]
    tokens_after: int | None
    error: bytes
    """The upstream's error body."""


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


class Trace(Protocol):
    """A request's open span (`proxy.observability.otel.trace`); only the otel observer
    looks inside. Typed here so serving never imports the OpenTelemetry SDK."""

    def carry(
        self, headers: list[tuple[bytes, bytes]], upstream_url: str
    ) -> list[tuple[bytes, bytes]]:
        """The upstream request's headers, carrying this span's trace context."""
        ...


class Tracer(Protocol):
    """Starts a request's span from its headers (`proxy.observability.otel.trace.Tracing`)."""

    def start(self, headers: Sequence[tuple[bytes, bytes]]) -> Trace: ...


Observer = Callable[[ExchangeRecord], None]


def notify(observers: Sequence[Observer], record: ExchangeRecord) -> None:
    """Call every observer; one that fails is logged and never affects the others."""
    for observer in observers:
        try:
            observer(record)
        except Exception:  # an audit or metrics bug must not break proxying
            log.exception("exchange observer %r failed on request %s", observer, record.id)
