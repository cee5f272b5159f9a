"""The summarizer's families: tokens it spent and saved, and its calls by result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policies.summary_io import SummaryStats
from proxy.observability.metrics.loop import LoopCounter

Child = Callable[..., Any]
"""`Metrics._child`: a family's labelled series, memoized."""


class SummarizerFamilies:
    """`curator_summarizer_tokens_total` and `curator_summarizer_calls_total`."""

    def __init__(self, loop_counter: Callable[..., LoopCounter]) -> None:
        self.tokens = loop_counter(
            "curator_summarizer_tokens",
            "Tokens summarizing spent (prompt + completion) and saved",
            "route",
            "kind",
        )
        self.calls = loop_counter(
            "curator_summarizer_calls",
            "Summaries by result: a model call that worked or failed, or a cache hit; and "
            "summary cache reads or writes that failed (cache_error: taken as misses)",
            "route",
            "result",
        )

    def observe(self, child: Child, route: str, stats: SummaryStats) -> None:
        spent = stats.prompt_tokens + stats.completion_tokens
        if spent:
            child(self.tokens, route, "spent").inc(spent)
        if stats.tokens_saved > 0:
            child(self.tokens, route, "saved").inc(stats.tokens_saved)
        results = {
            "ok": stats.calls - stats.failures,
            "cache_hit": stats.cache_hits,
            "error": stats.failures,
            "cache_error": stats.cache_errors,
        }
        for result, count in results.items():
            if count > 0:
                child(self.calls, route, result).inc(count)
