"""A short soak (bench/soak.py runs the long one): concurrent streams with bursts of aborts,
5xx, resets and timeouts through a real `curator serve`, then descriptors back to the
baseline, no socket in CLOSE_WAIT, every request audited exactly once, and exit code 0 on
SIGTERM. With two workers, both append to one JSONL audit file without mixing lines."""

from __future__ import annotations

import pytest

from bench.soak import Settings, run


@pytest.mark.parametrize(
    "settings",
    [Settings(rounds=2, concurrency=500), Settings(rounds=1, concurrency=300, workers=2)],
    ids=["one-worker", "two-workers"],
)
def test_a_short_soak_leaves_nothing_behind(settings: Settings) -> None:
    report, problems = run(settings)
    assert problems == []
    assert report.sent == settings.rounds * settings.concurrency
    assert sum(report.audit.values()) == report.sent
    assert len(report.samples) == settings.rounds
