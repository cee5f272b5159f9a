"""Prometheus metrics: what curation saves and what it costs.

One `Metrics` per process, owned by the app (no module-level registry). With
`curator serve --workers N`, prometheus-client's multiprocess mode is used: the parent
sets PROMETHEUS_MULTIPROC_DIR (cleaned at start) before the workers import anything, and a
scrape of any worker aggregates all of them.

Label values come only from config (route, policy and curator names, model families from
the `models:` table) or from small fixed sets (status codes, skip reasons, stages), never
from free client input, so cardinality stays bounded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from proxy.record import ExchangeRecord

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
NONE = "none"
OTHER = "other"

# Curation is sub-millisecond warm and ~100 ms cold; upstreams take seconds to minutes.
CURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
KNOWN_SKIPS = frozenset(
    {
        "invalid_json",
        "not_an_object",
        "no_messages",
        "bad_messages",
        "curator_error",
        "too_many_messages",
        "too_deep",
    }
)


@dataclass(frozen=True, slots=True)
class Labels:
    """The bounded sets label values are drawn from; anything else becomes `other`."""

    routes: frozenset[str]
    policies: frozenset[str]
    curators: frozenset[str]

    def route(self, value: str | None) -> str:
        return _bounded(value, self.routes)

    def policy(self, value: str | None) -> str:
        return _bounded(value, self.policies)

    def curator(self, value: str) -> str:
        return _bounded(value, self.curators)


def _bounded(value: str | None, allowed: frozenset[str]) -> str:
    if value is None:
        return NONE
    return value if value in allowed else OTHER


class Metrics:
    """The metric families, and an observer that updates them from an ExchangeRecord."""

    def __init__(self, labels: Labels, *, multiprocess_dir: str | None = None) -> None:
        self.labels = labels
        self.multiprocess_dir = multiprocess_dir or os.environ.get(MULTIPROC_ENV) or None
        # In multiprocess mode values live in files; the families still need a registry
        # that is not the global one, so each app gets its own.
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "curator_requests", "Proxied requests", ["route", "policy", "status"], registry=r
        )
        self.tokens = Counter(
            "curator_tokens", "Prompt tokens before/after curation", ["route", "stage"], registry=r
        )
        self.tokens_saved = Counter(
            "curator_tokens_saved", "Tokens removed, by curator", ["route", "curator"], registry=r
        )
        self.actions = Counter(
            "curator_actions", "Curator actions", ["route", "curator"], registry=r
        )
        self.skipped = Counter(
            "curator_skipped", "Requests forwarded uncurated, by reason", ["reason"], registry=r
        )
        self.curation_seconds = Histogram(
            "curator_curation_seconds",
            "Time spent curating a request",
            ["route"],
            buckets=CURATION_BUCKETS,
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "curator_upstream_seconds",
            "Upstream time to first byte and total",
            ["route", "phase"],
            buckets=UPSTREAM_BUCKETS,
            registry=r,
        )
        self.inflight = Gauge(
            "curator_inflight_requests",
            "Requests being proxied now",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.audit_records = Counter(
            "curator_audit_records", "Audit records by result", ["result"], registry=r
        )
        self.audit_queue_depth = Gauge(
            "curator_audit_queue_depth",
            "Audit records waiting to be written",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.tokenizer_fallback = Counter(
            "curator_tokenizer_fallback",
            "Encodings that could not be loaded and are estimated instead",
            registry=r,
        )
        self.config_reloads = Counter(
            "curator_config_reloads", "Config reloads by result", ["result"], registry=r
        )
        for result in ("written", "dropped", "failed"):
            self.audit_records.labels(result)
        for result in ("ok", "error"):
            self.config_reloads.labels(result)

    def observe(self, record: ExchangeRecord) -> None:
        """The exchange observer: count one finished request."""
        route = self.labels.route(record.route)
        status = str(record.status) if record.status is not None else record.outcome
        self.requests.labels(route, self.labels.policy(record.policy), status).inc()
        if record.skipped is not None:
            reason = record.skipped if record.skipped in KNOWN_SKIPS else OTHER
            self.skipped.labels(reason).inc()
        if record.tokens_before is not None and record.tokens_after is not None:
            self.tokens.labels(route, "before").inc(record.tokens_before)
            self.tokens.labels(route, "after").inc(record.tokens_after)
        for action in record.actions:
            curator = self.labels.curator(action.curator)
            self.actions.labels(route, curator).inc(max(1, len(action.indexes)))
            if action.tokens_removed > 0:
                self.tokens_saved.labels(route, curator).inc(action.tokens_removed)
        if record.curation_s is not None:
            self.curation_seconds.labels(route).observe(record.curation_s)
        if record.ttfb_s is not None:
            self.upstream_seconds.labels(route, "ttfb").observe(record.ttfb_s)
        if record.upstream_status is not None:
            self.upstream_seconds.labels(route, "total").observe(record.latency_s)

    def render(self) -> tuple[bytes, str]:
        """The exposition text, aggregated across workers in multiprocess mode."""
        if self.multiprocess_dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def prepare_multiprocess_dir(path: str) -> None:
    """Empty (or create) the multiprocess directory; call in the parent before workers start."""
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        if name.endswith(".db"):
            os.remove(os.path.join(path, name))


def mark_worker_dead(pid: int) -> None:
    """Drop a dead worker's live gauges (its counters keep counting in the totals)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def family_names(metrics: Metrics) -> Iterable[str]:
    """Every metric family name this process exports (for docs and dashboard tests)."""
    return sorted({m.name for m in metrics.registry.collect()})
