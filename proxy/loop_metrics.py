"""Metric families updated on the event loop thread alone: counters, histograms and a gauge
whose children add to plain numbers, exposed through a prometheus-client collector.

prometheus-client takes a lock on every update, and with the validation around it a
proxied request's seven updates cost ~7 us of the event loop, several percent of a
small request (measured). These children need no lock because one thread writes them.
A scrape may read them from another thread (the exposition is rendered off the loop):
each number it reads is whole, and at worst a histogram's `_sum` trails its buckets by
the observation being made at that instant. Totals only ever grow, as Prometheus expects.

Only for single-process serving: with `--workers N` the values must live in
prometheus-client's shared files, so `proxy.metrics` uses its own families there.
Families updated from other threads (the audit writer, tokenizer loads) are always
prometheus-client's.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence

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
    """One labelled counter series."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class HistogramChild:
    """One labelled histogram series: a count per bucket (the last one +Inf), and a sum."""

    __slots__ = ("bounds", "counts", "created", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # Bucket `le` holds values <= le: the first bound not below the amount.
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.total += amount


class _Family(Collector):
    """A family's name, help and label names, and its children by label values."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._created = _created_series()
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        return [self._empty()]

    def _empty(self) -> Metric:
        raise NotImplementedError


class LoopCounter(_Family):
    """A labelled counter, as `prometheus_client.Counter` exposes it."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self._children: dict[tuple[str, ...], CountChild] = {}
        super().__init__(name, documentation, labelnames, registry)

    def labels(self, *values: str) -> CountChild:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = CountChild()
        return child

    def _empty(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._empty()
        for values, child in list(self._children.items()):  # one atomic copy
            created = child.created if self._created else None
            family.add_metric(values, child.value, created=created)
        return [family]


class LoopHistogram(_Family):
    """A labelled histogram, as `prometheus_client.Histogram` exposes it."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        buckets: Sequence[float],
    ) -> None:
        self._bounds = tuple(sorted(float(b) for b in buckets))
        les = [floatToGoString(b) for b in self._bounds]  # type: ignore[no-untyped-call]
        self._les = [*les, "+Inf"]
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        super().__init__(name, documentation, labelnames, registry)

    def labels(self, *values: str) -> HistogramChild:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = HistogramChild(self._bounds)
        return child

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


class LoopGauge(_Family):
    """An unlabelled gauge (the requests in flight)."""

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        self.value = 0.0
        super().__init__(name, documentation, (), registry)

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def _empty(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation, value=self.value)]
