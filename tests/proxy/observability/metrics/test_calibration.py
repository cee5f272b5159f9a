"""The calibration and window metric families, read back from their registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from policies.calibration import Observation
from proxy.observability.metrics.calibration import FactsMetrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_an_observation_sets_the_ratio_and_counts_the_error(registry: CollectorRegistry) -> None:
    metrics = FactsMetrics(registry)
    metrics.calibrated("vllm", "llama-3.1-70b*", Observation(ratio=1.18, error=0.03))
    metrics.calibrated("vllm", "llama-3.1-70b*", Observation(ratio=1.2, error=-0.004))
    labels = {"upstream": "vllm", "model": "llama-3.1-70b*"}
    assert value(registry, "curator_calibration_ratio", **labels) == 1.2
    assert value(registry, "curator_calibration_error_ratio_count", upstream="vllm") == 2
    bucket = {"upstream": "vllm", "le": "0.0"}
    assert value(registry, "curator_calibration_error_ratio_bucket", **bucket) == 1


def test_assumed_windows_and_overflows_are_counted(registry: CollectorRegistry) -> None:
    metrics = FactsMetrics(registry)
    metrics.window_assumed("ollama")
    metrics.rescued("openai", retried=True)
    metrics.rescued("openai", retried=True)
    metrics.rescued("openai", retried=False)
    assert value(registry, "curator_window_assumed_total", upstream="ollama") == 1
    retried = {"upstream": "openai", "result": "retried"}
    assert value(registry, "curator_upstream_overflows_total", **retried) == 2
    passed = {"upstream": "openai", "result": "passed"}
    assert value(registry, "curator_upstream_overflows_total", **passed) == 1
