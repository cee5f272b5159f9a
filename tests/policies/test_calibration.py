"""The calibration estimator: neutral start, quick learning, robust to outliers, bounded."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.calibration import MAX_RATIO, NEUTRAL, WINDOW, BudgetHints, Calibration
from policies.policy import Policy
from policies.tokens import TokenCounter


def test_starts_neutral() -> None:
    cal = Calibration()
    assert cal.ratio("u", "m") == 1.0
    assert cal.scale("u", "m") == 1.0


def test_learns_a_constant_factor_in_two_requests() -> None:
    cal = Calibration()
    first = cal.observe("u", "m", 1000, 1300)
    assert first is not None
    assert first.error == pytest.approx(1000 / 1300 - 1)
    assert 1.0 < cal.ratio("u", "m") < 1.3  # half way (in log space) after one sample
    cal.observe("u", "m", 2000, 2600)
    assert cal.ratio("u", "m") == pytest.approx(1.3)
    third = cal.observe("u", "m", 500, 650)
    assert third is not None
    assert abs(third.error) < 1e-9


def test_one_outlier_barely_moves_a_settled_estimate() -> None:
    cal = Calibration()
    for ours in (1000, 1100, 1200, 1300, 1400):
        cal.observe("u", "m", ours, round(ours * 1.1))
    cal.observe("u", "m", 1000, 5000)  # e.g. a server that counted something we never sent
    assert cal.ratio("u", "m") == pytest.approx(1.1, rel=0.01)


def test_first_sample_is_bounded() -> None:
    cal = Calibration()
    cal.observe("u", "m", 10, 10_000)
    assert cal.ratio("u", "m") <= math.sqrt(MAX_RATIO) + 1e-9


def test_counting_less_upstream_never_widens_the_budget() -> None:
    cal = Calibration()
    for _ in range(3):
        cal.observe("u", "m", 1000, 800)
    assert cal.ratio("u", "m") == pytest.approx(0.8)
    assert cal.scale("u", "m") == 1.0


def test_keys_are_separate_and_bounded() -> None:
    cal = Calibration(max_keys=3)
    for i in range(10):
        cal.observe("u", f"m{i}", 100, 150)
        cal.observe("u", f"m{i}", 100, 150)
    assert len(cal) == 3
    assert cal.ratio("u", "m0") == 1.0  # evicted: back to neutral
    assert cal.ratio("u", "m9") == pytest.approx(1.5)
    assert cal.ratio("other", "m9") == 1.0


def test_ignores_missing_counts() -> None:
    cal = Calibration()
    assert cal.observe("u", "m", 0, 100) is None
    assert cal.observe("u", "m", 100, 0) is None
    assert len(cal) == 0


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="window"):
        Calibration(window=0)


ratios = st.floats(min_value=0.25, max_value=4.0, allow_nan=False)
counts = st.integers(min_value=1, max_value=500_000)


@given(st.lists(st.tuples(counts, ratios), max_size=40))
def test_estimate_stays_within_the_clip(samples: list[tuple[int, float]]) -> None:
    cal = Calibration()
    for ours, ratio in samples:
        cal.observe("u", "m", ours, max(1, round(ours * ratio)))
        assert 1 / MAX_RATIO - 1e-9 <= cal.ratio("u", "m") <= MAX_RATIO + 1e-9
        assert cal.scale("u", "m") >= 1.0


@given(
    st.floats(min_value=0.6, max_value=1.8),
    st.lists(st.integers(min_value=1000, max_value=200_000), min_size=WINDOW, max_size=30),
    st.floats(min_value=0.25, max_value=4.0),
)
def test_one_outlier_in_a_window_stays_between_neighbours(
    factor: float, ours: list[int], outlier: float
) -> None:
    cal = Calibration()
    for n in ours:
        cal.observe("u", "m", n, round(n * factor))
    cal.observe("u", "m", 10_000, round(10_000 * outlier))
    assert cal.ratio("u", "m") == pytest.approx(factor, rel=0.002)


@given(st.floats(min_value=1.0, max_value=2.0))
def test_budget_divides_the_room_by_the_scale(scale: float) -> None:
    counter = TokenCounter()
    body = {"model": "gpt-4o", "max_tokens": 1000}
    plain = Policy("p").budget(body, counter)
    scaled = Policy("p").budget(body, counter, BudgetHints(scale=scale))
    room = plain.messages + plain.tools
    assert scaled.messages == math.floor(room / scale) - scaled.tools
    assert scaled.scale == scale


def test_upstream_window_beats_the_table_but_not_an_override() -> None:
    from policies.models import ModelInfo, ModelTable

    counter = TokenCounter()
    body = {"model": "my-local-llama", "max_tokens": 100}
    assumed = Policy("p").budget(body, counter, NEUTRAL)
    assert assumed.context_window == 128_000
    told = Policy("p").budget(body, counter, BudgetHints(window=8192))
    assert told.context_window == 8192
    table = ModelTable.with_overrides([("my-local-*", ModelInfo(4096))])
    assert Policy("p").budget(body, TokenCounter(table), BudgetHints(8192)).context_window == 4096
    known = Policy("p").budget({"model": "llama-3.1-8b"}, counter, BudgetHints(window=32_768))
    assert known.context_window == 32_768
