"""Cost from usage: uncached input, cached input and output at their own prices."""

from __future__ import annotations

import pytest

from policies.pricing import BUILTIN, Price, PriceTable, Usage, cost


def test_cost_prices_each_kind_of_token() -> None:
    price = Price(input=2.0, cached_input=0.5, output=8.0)
    usage = Usage(input=10_000, cached=4_000, output=1_000, reasoning=600)
    # reasoning is part of output: billed once, at the output price
    assert cost(usage, price) == pytest.approx((6_000 * 2.0 + 4_000 * 0.5 + 1_000 * 8.0) / 1e6)


def test_cached_never_exceeds_input() -> None:
    price = Price(1.0, 0.1, 1.0)
    assert cost(Usage(input=100, cached=500), price) == pytest.approx(100 * 0.1 / 1e6)


def test_cache_reads_and_writes_are_billed_apart() -> None:
    price = Price(3.0, 0.3, 15.0, cache_write=3.75, cache_write_1h=6.0)
    usage = Usage(input=1000, cached=500, output=10, written=200, written_1h=100)
    expected = 200 * 3.0 + 500 * 0.3 + 200 * 3.75 + 100 * 6.0 + 10 * 15.0
    assert cost(usage, price) == pytest.approx(expected / 1e6)


def test_writes_without_a_write_price_are_billed_as_input() -> None:
    usage = Usage(input=1000, cached=0, output=0, written=400, written_1h=100)
    assert cost(usage, Price(2.0, 1.0, 8.0)) == pytest.approx(1000 * 2.0 / 1e6)
    assert cost(usage, Price(2.0, 1.0, 8.0, 2.5)) == pytest.approx((500 * 2 + 500 * 2.5) / 1e6)


def test_reads_and_writes_never_exceed_the_input() -> None:
    usage = Usage(input=100, cached=80, output=0, written=50, written_1h=50)
    price = Price(1.0, 0.1, 0.0, 10.0, 100.0)
    assert cost(usage, price) == pytest.approx((80 * 0.1 + 20 * 100.0) / 1e6)


def test_builtin_claude_prices_bill_writes_at_their_multipliers() -> None:
    for model in ("claude-sonnet-4-5-20250929", "claude-opus-4-5", "claude-haiku-4-5"):
        found = PriceTable().find(model)
        assert found is not None, model
        price = found[1]
        assert price.write == pytest.approx(1.25 * price.input), model
        assert price.write_1h == pytest.approx(2 * price.input), model
        assert price.cached_input == pytest.approx(0.1 * price.input), model


def test_lookup_is_first_match_overrides_before_builtins() -> None:
    table = PriceTable.with_overrides([("gpt-5*", Price(9, 9, 9))])
    assert table.find("gpt-5-mini") == ("gpt-5*", Price(9, 9, 9))
    assert table.find("openai/gpt-4o-mini-2024-07-18")[0] == "gpt-4o-mini*"  # type: ignore[index]
    assert table.find("o4-mini")[0] == "o4-mini*"  # type: ignore[index]
    assert table.find(None) is None
    assert table.find("claude-3") is None
    assert "gpt-5*" in table.patterns()


@pytest.mark.parametrize(
    ("model", "glob", "output"),
    [
        ("gpt-5", "gpt-5", 10.00),
        ("gpt-5-2025-08-07", "gpt-5-*", 10.00),
        ("gpt-5-codex", "gpt-5-*", 10.00),
        ("gpt-5-mini", "gpt-5-mini*", 2.00),
        ("gpt-5.1-codex-max", "gpt-5.1*", 10.00),
        ("gpt-5.1-codex-mini", "gpt-5.1-codex-mini*", 2.00),
        ("gpt-5.2", "gpt-5.2*", 14.00),
        ("gpt-5.2-pro", "gpt-5.2-pro*", 168.00),
    ],
)
def test_each_gpt5_version_has_its_own_price(model: str, glob: str, output: float) -> None:
    found = PriceTable().find(model)
    assert found is not None
    assert (found[0], found[1].output) == (glob, output)


def test_a_gpt5_version_without_an_entry_is_unpriced_not_priced_as_gpt5() -> None:
    assert PriceTable().find("gpt-5.9") is None


def test_builtin_globs_go_from_narrow_to_wide() -> None:
    """A narrower glob after a wider one that matches it could never be reached."""
    from fnmatch import fnmatchcase

    for i, (narrow, _) in enumerate(BUILTIN):
        example = narrow.rstrip("*") + "-x"
        assert all(not fnmatchcase(example, wide) for wide, _ in BUILTIN[:i]), narrow
    for _, price in BUILTIN:
        assert 0 <= price.cached_input <= price.input
