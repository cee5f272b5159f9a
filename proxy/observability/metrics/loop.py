"""Metric families updated on the event loop thread alone: counters, histograms and a gauge
whose children add to plain numbers, exposed through a prometheus-client collector.

prometheus-client takes a lock on every update (and, with `--workers N`, also writes a
shared memory-mapped file), and with the validation around it a proxied request's seven
updates cost ~7 us of the event loop with one worker and ~15 us with several, several
percent of a small request (measured). These children need no lock because one thread
writes them. A scrape may read them from another thread (the exposition is rendered off
the loop): each number it reads is whole, and at worst a histogram's `_sum` trails its
buckets by the observation being made at that instant. Totals only ever grow.

Shared (`--workers N`): each family also keeps a prometheus-client twin of the same name,
whose values live in the multiprocess files every worker's scrape adds up. `publish()`
adds what was counted since the last call to the twin; `proxy.observability.metrics.families`
calls it twice a second, before each scrape it answers and at exit, so another worker's
scrape sees this one's counts at most half a second late. Families updated from other
threads (the audit writer, tokenizer loads) are prometheus-client's own.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString


def _created_series() -> bool:
    """Whether `_created` samples are shown, read as prometheus-client reads it."""
    value = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False")
    return value.lower() not in ("true", "1", "t")


class CountChild:
    """One labelled counter series; `published` is the part already added to the twin."""

    __slots__ = ("created", "published", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.published = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class HistogramChild:
    """One labelled histogram series: a count per bucket (the last one +Inf), and a sum."""

    __slots__ = ("bounds", "counts", "created", "published", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.published: tuple[list[int], float] = (list(self.counts), 0.0)
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # Bucket `le` holds values <= le: the first bound not below the amount.
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.total += amount


C = TypeVar("C", CountChild, HistogramChild)


class _Family(Collector, Generic[C]):
    """A family's name, help and label names, its children by label values, and its
    prometheus-client twin when shared."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        *,
        shared: bool = False,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        self._created = _created_series()
        self._twin: Any = self._new_twin() if shared else None
        registry.register(self)

    def labels(self, *values: str) -> C:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values")
            child = self._children[values] = self._new_child()
        return child

    def describe(self) -> Iterable[Metric]:
        return [self._empty()]

    def publish(self) -> None:
        """Add what was counted since the last call to the twin (one caller at a time)."""
        if self._twin is not None:
            for values, child in list(self._children.items()):  # one atomic copy
                # An unlabelled family's twin is its own only series.
                twin = self._twin.labels(*values) if values else self._twin
                self._publish(twin, child)

    def _new_child(self) -> C:
        raise NotImplementedError

    def _new_twin(self) -> Any:
        raise NotImplementedError

    def _empty(self) -> Metric:
        raise NotImplementedError

    def _publish(self, twin: Any, child: C) -> None:
        raise NotImplementedError


class LoopCounter(_Family[CountChild]):
    """A labelled counter, as `prometheus_client.Counter` exposes it."""

    def _new_child(self) -> CountChild:
        return CountChild()

    def _new_twin(self) -> Counter:
        return Counter(self.name, self.documentation, self.labelnames, registry=None)

    def _empty(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._empty()
        for values, child in list(self._children.items()):
            created = child.created if self._created else None
            family.add_metric(values, child.value, created=created)
        return [family]

    def _publish(self, twin: Any, child: CountChild) -> None:
        value = child.value
        if value != child.published:
            twin.inc(value - child.published)
            child.published = value


class LoopHistogram(_Family[HistogramChild]):
    """A labelled histogram, as `prometheus_client.Histogram` exposes it."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        buckets: Sequence[float],
        *,
        shared: bool = False,
    ) -> None:
        self._bounds = tuple(sorted(float(b) for b in buckets))
        les = [floatToGoString(b) for b in self._bounds]  # type: ignore[no-untyped-call]
        self._les = [*les, "+Inf"]
        super().__init__(name, documentation, labelnames, registry, shared=shared)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self._bounds)

    def _new_twin(self) -> Histogram:
        return Histogram(
            self.name, self.documentation, self.labelnames, buckets=self._bounds, registry=None
        )

    def _empty(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._empty()
        for values, child in list(self._children.items()):
            counts, total = list(child.counts), child.total
            cumulative, running = [], 0
            for le, count in zip(self._les, counts, strict=True):
                running += count
                cumulative.append((le, float(running)))
            family.add_metric(values, cumulative, total)
            if self._created:
                labels = dict(zip(self.labelnames, values, strict=True))
                family.samples.append(Sample(self.name + "_created", labels, child.created))
        return [family]

    def _publish(self, twin: Any, child: HistogramChild) -> None:
        counts, total = list(child.counts), child.total
        before, before_total = child.published
        # prometheus-client's Histogram has no public way to add to one bucket: its
        # per-bucket values (`_buckets`, non-cumulative, +Inf last) and `_sum` are used.
        for bucket, now, then in zip(twin._buckets, counts, before, strict=True):
            if now != then:
                bucket.inc(now - then)
        if total != before_total:
            twin._sum.inc(total - before_total)
        child.published = (counts, total)


class LoopGauge(Collector):
    """An unlabelled gauge (the requests in flight); shared, its twin sums live workers."""

    def __init__(
        self, name: str, documentation: str, registry: CollectorRegistry, *, shared: bool = False
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        self._twin = (
            Gauge(name, documentation, registry=None, multiprocess_mode="livesum")
            if shared
            else None
        )
        registry.register(self)

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation, value=self.value)]

    def publish(self) -> None:
        if self._twin is not None:
            self._twin.set(self.value)
