"""One record per proxied request, handed to observers (audit log, metrics) when it ends.

Records are built only when the app has observers, and they hold references to the
request's message lists rather than copies, so a proxy without observers pays nothing.
Observers run on the event loop right after the exchange: they must be quick (enqueue,
increment) and must not mutate what they are given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from policies.base import Action, SummaryStats
from policies.messages import Message

log = logging.getLogger("curator.record")

Outcome = Literal["ok", "client_disconnect", "upstream_error", "proxy_error"]
"""ok: the upstream's response was relayed in full (whatever its status).
client_disconnect: the client left before the response ended; the upstream was closed.
upstream_error: the upstream failed (before or during the response).
proxy_error: the proxy answered with its own error (no route, too large, overflow reject).
"""


@dataclass(frozen=True, slots=True)
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


Observer = Callable[[ExchangeRecord], None]


def notify(observers: Sequence[Observer], record: ExchangeRecord) -> None:
    """Call every observer; one that fails is logged and never affects the others."""
    for observer in observers:
        try:
            observer(record)
        except Exception:  # an audit or metrics bug must not break proxying
            log.exception("exchange observer %r failed on request %s", observer, record.id)
