"""Metrics of what the proxy learns about its upstreams (`proxy.upstream.facts`).

- `curator_calibration_ratio{upstream, model}`: upstream prompt count / ours, as estimated
  now (1.0: we count as the upstream does; 1.2: it counts 20% more, and the budget leaves
  that room). With `--workers N` each worker learns on its own; the highest is shown.
- `curator_calibration_error_ratio{upstream}`: what we predicted (our count times the estimate
  in force) / what the upstream reported, minus one, for each curated response.
- `curator_window_assumed_total{upstream}`: requests whose model's window nobody knew.
- `curator_upstream_overflows_total{upstream, result}`: curated requests the upstream
  rejected as too long: `retried` (curated again and resent before the client saw
  anything) or `passed` (the policy could cut nothing more:
  the client got the upstream's 400). A policy with `on_upstream_overflow: pass` counts
  nothing here: its overflows reach the client as the upstream wrote them.

Model names come from clients, so the `model` label is never one of theirs: it is the id
the upstream's model list gave, else the glob of the `models:` entry or built-in table row
the model matched, else `other` (`proxy.upstream.facts.model_label`).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from policies.calibration import Observation

ERROR_BUCKETS = (
    -0.5, -0.2, -0.1, -0.05, -0.02, -0.01, -0.005, 0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
)  # fmt: skip


class FactsMetrics:
    """The calibration and window families, registered on the app's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.ratio = Gauge(
            "curator_calibration_ratio",
            "Upstream prompt tokens / ours, as estimated now",
            ("upstream", "model"),
            registry=registry,
            multiprocess_mode="max",
        )
        self.error = Histogram(
            "curator_calibration_error_ratio",
            "Our calibrated prompt count / the upstream's, minus one, per response",
            ("upstream",),
            registry=registry,
            buckets=ERROR_BUCKETS,
        )
        self.assumed = Counter(
            "curator_window_assumed",
            "Requests whose model's context window was assumed (no entry, no upstream list)",
            ("upstream",),
            registry=registry,
        )

        self.overflows = Counter(
            "curator_upstream_overflows",
            "Curated requests the upstream rejected as too long, by what the proxy did",
            ("upstream", "result"),
            registry=registry,
        )

        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        """Each (upstream, model label)'s ratio and error children: `labels()` validates
        and locks on every call, and this runs for every curated response."""

    def calibrated(self, upstream: str, label: str, observation: Observation) -> None:
        # Upstream names come from the config (the route's), and model labels are globs of
        # the tables or `other` (`model_label`), so the memo is bounded as they are.
        children = self._children.get((upstream, label))
        if children is None:
            children = (self.ratio.labels(upstream, label), self.error.labels(upstream))
            self._children[upstream, label] = children
        children[0].set(observation.ratio)
        children[1].observe(observation.error)

    def window_assumed(self, upstream: str) -> None:
        self.assumed.labels(upstream).inc()

    def rescued(self, upstream: str, retried: bool) -> None:
        self.overflows.labels(upstream, "retried" if retried else "passed").inc()
