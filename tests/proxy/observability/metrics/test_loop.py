"""proxy.observability.metrics.loop: exposed exactly as prometheus-client's families would be."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.observability.metrics.families import CURATION_BUCKETS
from proxy.observability.metrics.loop import LoopCounter, LoopGauge, LoopHistogram

CREATED = re.compile(rb"^(\S+_created\S*) \S+$", re.MULTILINE)

routes = st.sampled_from(["chat", "code", "other"])
amounts = st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False))
seconds = st.one_of(
    st.sampled_from([0.0, *CURATION_BUCKETS, 2.0]), st.floats(0, 3, allow_nan=False)
)


def exposition(registry: CollectorRegistry) -> bytes:
    """The text exposition with the `_created` timestamps blanked (each side has its own)."""
    return CREATED.sub(rb"\1 T", generate_latest(registry))


@given(st.lists(st.tuples(routes, amounts, seconds), max_size=30))
def test_the_exposition_matches_prometheus_clients(updates: list[tuple[str, float, float]]) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("t_tokens", "Tokens", ["route"], registry=theirs)
    histogram = Histogram("t_seconds", "Time", ["route"], buckets=CURATION_BUCKETS, registry=theirs)
    gauge = Gauge("t_inflight", "In flight", registry=theirs)
    loop_counter = LoopCounter("t_tokens", "Tokens", ["route"], ours)
    loop_histogram = LoopHistogram("t_seconds", "Time", ["route"], ours, CURATION_BUCKETS)
    loop_gauge = LoopGauge("t_inflight", "In flight", ours)
    for route, amount, took in updates:
        counter.labels(route).inc(amount)
        loop_counter.labels(route).inc(amount)
        histogram.labels(route).observe(took)
        loop_histogram.labels(route).observe(took)
        gauge.inc()
        loop_gauge.inc()
        if took > 1:
            gauge.dec(2)
            loop_gauge.dec(2)
    assert exposition(ours) == exposition(theirs)


def test_created_series_follow_prometheus_clients_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    LoopCounter("t_shown", "x", ["a"], registry).labels("1").inc()
    monkeypatch.setenv("PROMETHEUS_DISABLE_CREATED_SERIES", "true")
    LoopCounter("t_hidden", "x", ["a"], registry).labels("1").inc()
    LoopHistogram("t_hidden_seconds", "x", ["a"], registry, (1.0,)).labels("1").observe(0.5)
    text = generate_latest(registry).decode()
    assert 't_shown_created{a="1"}' in text
    assert "t_hidden_created" not in text
    assert "t_hidden_seconds_created" not in text


def test_misuse_is_refused_as_prometheus_client_refuses_it() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("t_requests", "x", ["route", "status"], registry)
    with pytest.raises(ValueError, match="label values"):
        counter.labels("chat")
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("chat", "200").inc(-1)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        LoopCounter("t_requests", "x", ["route"], registry)


def test_a_scrape_from_another_thread_sees_whole_growing_totals() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("t_requests", "x", ["route"], registry)
    histogram = LoopHistogram("t_seconds", "x", ["route"], registry, (0.5,))
    started, stop = threading.Event(), threading.Event()
    totals: list[float] = []
    failures: list[Exception] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                text = generate_latest(registry).decode()
            except Exception as exc:  # a dict changing size under the scrape, say
                failures.append(exc)
            else:
                samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
                totals.append(sum(s.value for s in samples if s.name == "t_requests_total"))
            started.set()

    scraper = threading.Thread(target=scrape)
    scraper.start()
    assert started.wait(10)
    for i in range(20_000):
        route = f"r{i % 400}"  # new series keep appearing while the scraper reads
        counter.labels(route).inc()
        histogram.labels(route).observe(0.25)
    stop.set()
    scraper.join()
    assert not failures
    assert totals == sorted(totals)  # every scrape saw at least what the one before did
    final = generate_latest(registry).decode()
    assert final.count('t_requests_total{route="r0"} 50.0') == 1
    assert 't_seconds_bucket{le="0.5",route="r399"} 50.0' in final


SHARED_SCRIPT = """
import sys
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from proxy.observability.metrics.loop import LoopCounter, LoopGauge, LoopHistogram
from proxy.observability.metrics.families import CURATION_BUCKETS

ours = CollectorRegistry()
counter = LoopCounter("t_tokens", "Tokens", ["route"], ours, shared=True)
histogram = LoopHistogram("t_seconds", "Time", ["route"], ours, CURATION_BUCKETS, shared=True)
gauge = LoopGauge("t_inflight", "In flight", ours, shared=True)
families = (counter, histogram, gauge)
for round in range(3):  # publishing adds only what is new since the last time
    for i in range(40):
        route = ("chat", "code")[i % 2]
        counter.labels(route).inc(i * (round + 1))
        histogram.labels(route).observe(i / 97)
        gauge.inc()
    gauge.dec(15)
    for family in families:
        family.publish()
    if round == 0:
        for family in families:
            family.publish()  # nothing new: adds nothing
shared = CollectorRegistry()
multiprocess.MultiProcessCollector(shared, path=sys.argv[1])
sys.stdout.write(generate_latest(ours).decode() + "\\n=====\\n" + generate_latest(shared).decode())
"""


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset((k, v) for k, v in s.labels.items() if k != "pid")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_shared_families_publish_their_counts_to_the_multiprocess_files(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SHARED_SCRIPT, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[4],
    )
    ours, shared = done.stdout.split("\n=====\n")
    assert _samples(shared) == _samples(ours)
    assert _samples(ours)[("t_inflight", frozenset())] == 75
    assert _samples(ours)[("t_seconds_count", frozenset({("route", "chat")}))] == 60
