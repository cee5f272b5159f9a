"""The spend families: upstream tokens by kind, and the actual and uncurated cost."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from policies.pricing import Price, PriceTable, Usage
from proxy.observability.metrics.spend import SpendFamilies
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account
from tests import factories as f

PRICES = PriceTable.with_overrides([("gpt-4o*", Price(2.5, 1.25, 10.0))])


class Series:
    """A stand-in for a labelled child: it adds up what it is given."""

    def __init__(self) -> None:
        self.total = 0.0

    def inc(self, amount: float = 1) -> None:
        self.total += amount


def observed(model: str, original: list[dict[str, Any]] | None) -> dict[tuple[str, ...], float]:
    series: dict[tuple[str, ...], Series] = defaultdict(Series)
    families = SpendFamilies(lambda name, *_l: name, lambda name, *_l: name)
    usage = Usage(input=100, cached=40, output=10, reasoning=3)
    spend = account(
        Sent.of(model, None, original, [], usage), f.counter(), PRICES, Counterfactuals()
    )
    families.observe(lambda fam, *labels: series[(fam, *labels)], "agents", "coding", spend)
    assert families.thread.join(10)  # the deferred uncurated cost is counted there
    families.thread.close()
    return {key: s.total for key, s in series.items()}


def test_tokens_by_kind_and_both_costs_under_the_price_glob() -> None:
    totals = observed("gpt-4o-mini", [f.system("Be terse."), f.user("Fix it.")])
    tokens = {k[-1]: v for k, v in totals.items() if k[0] == "curator_upstream_tokens"}
    assert tokens == {"input": 100, "cached": 40, "output": 10, "reasoning": 3}
    assert {k[3] for k in totals} == {"gpt-4o*"}
    actual = totals[("curator_cost_usd", "agents", "coding", "gpt-4o*", "actual")]
    assert actual == pytest.approx((60 * 2.5 + 40 * 1.25 + 10 * 10.0) / 1e6)
    assert totals[("curator_cost_usd", "agents", "coding", "gpt-4o*", "uncurated")] > 0


def test_cache_writes_are_their_own_token_kinds() -> None:
    series: dict[tuple[str, ...], Series] = defaultdict(Series)
    families = SpendFamilies(lambda name, *_l: name, lambda name, *_l: name)
    usage = Usage(input=500, cached=100, output=10, written=300, written_1h=50)
    spend = account(
        Sent.of("claude-sonnet-4-5", None, None, [], usage), f.counter(), PRICES, Counterfactuals()
    )
    families.observe(lambda fam, *labels: series[(fam, *labels)], "a", "p", spend)
    tokens = {k[-1]: s.total for k, s in series.items() if k[0] == "curator_upstream_tokens"}
    assert tokens == {
        "input": 500,
        "cached": 100,
        "cache_write": 300,
        "cache_write_1h": 50,
        "output": 10,
    }


def test_an_unpriced_model_is_other_and_costs_nothing() -> None:
    totals = observed("my-llama", None)
    assert {k[3] for k in totals} == {"other"}
    assert all(total == 0 for key, total in totals.items() if key[0] == "curator_cost_usd")
