"""The summarizer's families: tokens spent and saved, and calls by result."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from policies.summary_io import SummaryStats
from proxy.observability.metrics.summarizer import SummarizerFamilies


class Series:
    """A stand-in for a loop counter's labelled child: it adds up what it is given."""

    def __init__(self) -> None:
        self.total = 0

    def inc(self, amount: int = 1) -> None:
        self.total += amount


def families() -> tuple[SummarizerFamilies, dict[tuple[Any, ...], Series]]:
    series: dict[tuple[Any, ...], Series] = defaultdict(Series)
    made = SummarizerFamilies(lambda name, *_labels: name)  # the family is its name here
    return made, series


def test_spent_saved_and_each_result_are_counted() -> None:
    made, series = families()

    def child(family: str, *labels: str) -> Series:
        return series[(family, *labels)]

    stats = SummaryStats(
        calls=3, cache_hits=2, failures=1, cache_errors=2, prompt_tokens=900,
        completion_tokens=100, tokens_saved=4_000,
    )  # fmt: skip
    made.observe(child, "agents", stats)
    totals = {key: s.total for key, s in series.items()}
    assert totals == {
        ("curator_summarizer_tokens", "agents", "spent"): 1_000,
        ("curator_summarizer_tokens", "agents", "saved"): 4_000,
        ("curator_summarizer_calls", "agents", "ok"): 2,
        ("curator_summarizer_calls", "agents", "cache_hit"): 2,
        ("curator_summarizer_calls", "agents", "error"): 1,
        ("curator_summarizer_calls", "agents", "cache_error"): 2,
    }


def test_nothing_is_counted_for_a_request_without_summaries() -> None:
    made, series = families()
    made.observe(lambda family, *labels: series[(family, *labels)], "agents", SummaryStats())
    assert series == {}
