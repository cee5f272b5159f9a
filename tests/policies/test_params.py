"""params: the curators' parameter checks name the key, what was expected and what came."""

from __future__ import annotations

import math

import pytest

from policies import params
from policies.errors import ParamError


def test_integers_reject_bools_and_values_below_the_minimum() -> None:
    assert params.integer("n", 0, minimum=0) == 0
    with pytest.raises(ParamError, match=r"^n: must be an integer, got True \(bool\)$"):
        params.integer("n", True, minimum=0)
    with pytest.raises(ParamError, match=r"^n: must be > 0, got 0$"):
        params.integer("n", 0, minimum=1)
    with pytest.raises(ParamError, match=r"^n: must be >= 2, got 1$"):
        params.integer("n", 1, minimum=2)
    with pytest.raises(ParamError, match=r'must be an integer or "auto", got 1.5 \(float\)'):
        params.integer("n", 1.5, minimum=1, expected='an integer or "auto"')


def test_ratios_accept_ints_and_reject_nan_and_out_of_range() -> None:
    assert params.ratio("r", 1, allow_zero=False) == 1.0
    assert params.ratio("r", 0, allow_zero=True) == 0.0
    for bad in (0, -0.1, 1.01, math.nan):
        with pytest.raises(ParamError, match=r"^r: must be in \(0, 1\]"):
            params.ratio("r", bad, allow_zero=False)
    with pytest.raises(ParamError, match=r"^r: must be a number, got '0.5' \(str\)$"):
        params.ratio("r", "0.5", allow_zero=True)


def test_booleans_must_be_booleans() -> None:
    assert params.boolean("b", False) is False
    with pytest.raises(ParamError, match=r"^b: must be true or false, got 1 \(int\)$"):
        params.boolean("b", 1)


def test_names_are_non_empty_strings_from_the_allowed_set() -> None:
    assert params.names("t", ["a", "b"]) == ("a", "b")
    assert params.names("t", ()) == ()
    with pytest.raises(ParamError, match=r"^t: must be a list of strings, got 'a' \(str\)$"):
        params.names("t", "a")
    with pytest.raises(ParamError, match=r"^t: must not be empty$"):
        params.names("t", [], allow_empty=False)
    with pytest.raises(ParamError, match=r"^t: items must be non-empty strings, got '' \(str\)$"):
        params.names("t", ["a", ""])
    with pytest.raises(ParamError, match=r"^t: unknown value 'c'; expected one of: a, b$"):
        params.names("t", ["c"], allowed={"b", "a"})
