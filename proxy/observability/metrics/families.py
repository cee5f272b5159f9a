"""Prometheus metrics: what curation saves and what it costs.

One `Metrics` per process, owned by the app (no module-level registry). Families the
event loop updates on every request are `proxy.observability.metrics.loop`' lock-free ones; the rest
(updated from the audit writer's and other threads) are prometheus-client's. With
`curator serve --workers N`, prometheus-client's multiprocess mode is used: the parent
sets PROMETHEUS_MULTIPROC_DIR (cleaned at start) before the workers import anything, each
worker publishes its loop families' counts there twice a second and before each scrape it
answers, and a scrape of any worker aggregates all of them.

A worker that crashed leaves its live gauges (in flight, audit queue depth) behind; each
scrape drops those of workers that are no longer running, so the sums stay true.

Label values come only from config or from small fixed sets
(`proxy.observability.metrics.labels`), so cardinality stays bounded.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
    multiprocess,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase

from proxy.observability.exchange import ExchangeRecord
from proxy.observability.metrics.calibration import FactsMetrics
from proxy.observability.metrics.labels import (
    INCOMPLETE_REASONS,
    KNOWN_SKIPS,
    OTHER,
    REJECT_REASONS,
    Labels,
)
from proxy.observability.metrics.lag import LagFamilies
from proxy.observability.metrics.loop import LoopCounter, LoopGauge, LoopHistogram
from proxy.observability.metrics.multiproc import MULTIPROC_ENV, forget_dead_workers
from proxy.observability.metrics.otel import OtelFamilies
from proxy.observability.metrics.spend import SpendFamilies
from proxy.observability.metrics.spool import SpoolFamilies
from proxy.observability.metrics.summarizer import SummarizerFamilies

# Curation is sub-millisecond warm and ~100 ms cold; upstreams take seconds to minutes.
log = logging.getLogger("curator.metrics")

CURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
UPSTREAM_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
UPSTREAM_ERROR_CODES = frozenset({"upstream_unreachable", "upstream_timeout", "upstream_error"})


@dataclass(frozen=True, slots=True)
class _Meters:
    """The series one (route, policy, status) updates on every request, looked up once."""

    route: str
    requests: Any
    tokens_before: Any
    tokens_after: Any
    curation: Any
    ttfb: Any
    total: Any


class Metrics:
    """The metric families, and an observer that updates them from an ExchangeRecord."""

    def __init__(self, labels: Labels, *, multiprocess_dir: str | None = None) -> None:
        self.labels = labels
        self.multiprocess_dir = multiprocess_dir or os.environ.get(MULTIPROC_ENV) or None
        # In multiprocess mode values live in files; the families still need a registry
        # that is not the global one, so each app gets its own.
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[object, ...], Any] = {}
        self._shares = bool(self.multiprocess_dir)
        self._loop_families: list[LoopCounter | LoopHistogram | LoopGauge] = []
        self._publishing = threading.Lock()
        self._meters: dict[tuple[str | None, str | None, str, str], _Meters] = {}
        self._traffic_families()
        self._operation_families()
        self.facts = FactsMetrics(self.registry)
        """Calibration, assumed windows and overflow rescues (`proxy.upstream.facts`)."""
        self.spend = SpendFamilies(self._loop_counter, self._counter)
        self.summarizer = SummarizerFamilies(self._loop_counter)
        self.otel = OtelFamilies(self._counter)
        self.loop_lag = LagFamilies(self._loop_histogram, self.registry)
        self.spool = SpoolFamilies(self.registry)
        # Families with closed label sets show every series from the start.
        for reason in REJECT_REASONS:
            self.rejected.labels(reason)
        for result in ("written", "dropped", "failed"):
            self.audit_records.labels(result)
        for result in ("ok", "error"):
            self.config_reloads.labels(result)

    def _counter(self, name: str, doc: str, *labelnames: str) -> Counter:
        """A family updated from any thread."""
        return Counter(name, doc, labelnames, registry=self.registry)

    def _loop_counter(self, name: str, doc: str, *labelnames: str) -> LoopCounter:
        """A family updated on the event loop only (see `proxy.observability.metrics.loop`)."""
        family = LoopCounter(name, doc, labelnames, self.registry, shared=self._shares)
        self._loop_families.append(family)
        return family

    def _loop_histogram(
        self, name: str, doc: str, labelnames: list[str], buckets: tuple[float, ...]
    ) -> LoopHistogram:
        family = LoopHistogram(name, doc, labelnames, self.registry, buckets, shared=self._shares)
        self._loop_families.append(family)
        return family

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, registry=self.registry, multiprocess_mode="livesum")

    def _traffic_families(self) -> None:
        counter = self._loop_counter
        self.requests = counter(
            "curator_requests", "Proxied requests", "route", "policy", "status", "protocol"
        )
        self.tokens = counter(
            "curator_tokens", "Prompt tokens before/after curation", "route", "stage", "protocol"
        )
        self.tokens_saved = counter(
            "curator_tokens_saved", "Tokens removed, by curator", "route", "curator"
        )
        self.actions = counter(
            "curator_actions", "Messages touched, by curator", "route", "curator"
        )
        self.skipped = counter(
            "curator_skipped", "Requests forwarded uncurated, by reason", "reason"
        )
        self.curation_seconds = self._loop_histogram(
            "curator_curation_seconds", "Time spent curating a request", ["route"], CURATION_BUCKETS
        )
        self.upstream_seconds = self._loop_histogram(
            "curator_upstream_seconds",
            "Upstream time to first byte and total",
            ["route", "phase"],
            UPSTREAM_BUCKETS,
        )

    def _operation_families(self) -> None:
        counter, gauge, loop_counter = self._counter, self._gauge, self._loop_counter
        self.inflight = LoopGauge(
            "curator_inflight_requests",
            "Requests being proxied now",
            self.registry,
            shared=self._shares,
        )
        self._loop_families.append(self.inflight)
        self.audit_records = counter("curator_audit_records", "Audit records by result", "result")
        self.audit_queue_depth = gauge(
            "curator_audit_queue_depth", "Audit records waiting to be written"
        )
        self.tokenizer_fallback = counter(
            "curator_tokenizer_fallback",
            "Encodings that could not be loaded and are estimated instead",
        )
        self.config_reloads = counter(
            "curator_config_reloads", "Config reloads by result", "result"
        )
        self.upstream_errors = loop_counter(
            "curator_upstream_errors",
            "Upstream failures by phase: before the response started, or mid-response",
            "route",
            "phase",
            "code",
        )
        self.incomplete = loop_counter(
            "curator_responses_incomplete",
            "Responses the client did not get in full: upstream failure mid-response, "
            "client disconnect, or shutdown",
            "route",
            "policy",
            "reason",
        )
        self.rejected = loop_counter(
            "curator_rejected",
            "Requests the gate answered itself (bad proxy key, too large, overloaded)",
            "reason",
        )

    def _child(self, family: MetricWrapperBase | LoopCounter | LoopHistogram, *values: str) -> Any:
        """`family.labels(*values)`, memoized: labels() validates and locks on every call,
        a measurable share of a proxied request. Bounded, as label values are."""
        key = (family, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*values)
        return child

    def observe(self, record: ExchangeRecord) -> None:
        """The exchange observer: count one finished request."""
        status = str(record.status) if record.status is not None else record.outcome
        protocol = record.protocol.name if record.protocol is not None else OTHER
        key = (record.route, record.policy, status, protocol)
        meters = self._meters.get(key)
        if meters is None:
            meters = self._meters[key] = self._exchange_meters(*key)
        meters.requests.inc()
        route = meters.route
        if record.skip_reason is not None:
            reason = record.skip_reason if record.skip_reason in KNOWN_SKIPS else OTHER
            self._child(self.skipped, reason).inc()
        if record.tokens_before is not None and record.tokens_after is not None:
            meters.tokens_before.inc(record.tokens_before)
            meters.tokens_after.inc(record.tokens_after)
        if record.actions:
            self._actions(route, record)
        if record.summary is not None:
            self.summarizer.observe(self._child, route, record.summary)
        if record.curation_s is not None:
            meters.curation.observe(record.curation_s)
        if record.ttfb_s is not None:
            meters.ttfb.observe(record.ttfb_s)
        if record.upstream_status is not None:
            meters.total.observe(record.latency_s)
        if record.error in UPSTREAM_ERROR_CODES:
            phase = "before_response" if record.upstream_status is None else "mid_response"
            self._child(self.upstream_errors, route, phase, record.error).inc()
        if record.spend is not None:
            self.spend.observe(self._child, route, self.labels.policy(record.policy), record.spend)
        if record.incomplete is not None:
            reason = record.incomplete if record.incomplete in INCOMPLETE_REASONS else OTHER
            policy = self.labels.policy(record.policy)
            self._child(self.incomplete, route, policy, reason).inc()

    def _exchange_meters(
        self, route: str | None, policy: str | None, status: str, protocol: str
    ) -> _Meters:
        bounded = self.labels.route(route)
        requests = self._child(self.requests, bounded, self.labels.policy(policy), status, protocol)
        return _Meters(
            route=bounded,
            requests=requests,
            tokens_before=self._child(self.tokens, bounded, "before", protocol),
            tokens_after=self._child(self.tokens, bounded, "after", protocol),
            curation=self._child(self.curation_seconds, bounded),
            ttfb=self._child(self.upstream_seconds, bounded, "ttfb"),
            total=self._child(self.upstream_seconds, bounded, "total"),
        )

    def _actions(self, route: str, record: ExchangeRecord) -> None:
        # Messages touched per curator, as `x-curator-actions` counts them, so the two agree.
        touched: dict[str, set[int]] = {}
        saved: dict[str, int] = {}
        for action in record.actions:
            curator = self.labels.curator(action.curator)
            touched.setdefault(curator, set()).update(action.indexes)
            saved[curator] = saved.get(curator, 0) + action.tokens_removed
        for curator, indexes in touched.items():
            self._child(self.actions, route, curator).inc(len(indexes))
            if saved[curator] > 0:
                self._child(self.tokens_saved, route, curator).inc(saved[curator])

    def audit_outcome(self, outcome: str, queue_depth: int) -> None:
        """The audit writer's callback: one record written, dropped or failed."""
        self._child(self.audit_records, outcome).inc()
        self.audit_queue_depth.set(queue_depth)

    def config_reloaded(self, ok: bool, labels: Labels | None = None) -> None:
        """Count a config reload; a good one brings the new config's label sets."""
        self.config_reloads.labels("ok" if ok else "error").inc()
        if labels is not None:
            self.labels = labels
            self._meters = {}  # resolved against the old labels

    def publish(self) -> None:
        """Multiprocess mode: add this worker's latest counts to the shared files."""
        with self._publishing:
            for family in self._loop_families:
                try:
                    family.publish()
                except Exception:  # one family's bug must not stop the others' counts
                    log.exception("metrics: publishing %s failed", family.name)

    def render(self) -> tuple[bytes, str]:
        """The exposition text, aggregated across workers in multiprocess mode."""
        if self.multiprocess_dir:
            self.publish()
            forget_dead_workers(self.multiprocess_dir)
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
