"""Parameter checks shared by the curators' `__post_init__`.

YAML hands curators whatever the operator typed, so each check verifies the type as well
as the range and raises `ParamError` naming the YAML key, what was expected and what was
found. Booleans are rejected where numbers are expected: YAML's `yes` is not a count.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from policies.errors import ParamError


def _found(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def integer(field: str, value: object, *, minimum: int, expected: str = "an integer") -> int:
    """An int (not a bool) of at least `minimum`; `expected` names what else was allowed."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(field, f"must be {expected}, got {_found(value)}")
    if value < minimum:
        bound = "> 0" if minimum == 1 else f">= {minimum}"
        raise ParamError(field, f"must be {bound}, got {value}")
    return value


def ratio(field: str, value: object, *, allow_zero: bool) -> float:
    """A number in [0, 1], or in (0, 1] without `allow_zero`; ints are accepted as floats."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParamError(field, f"must be a number, got {_found(value)}")
    number = float(value)
    low_ok = number >= 0 if allow_zero else number > 0
    if math.isnan(number) or not low_ok or number > 1:
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ParamError(field, f"must be in {interval}, got {value}")
    return number


def boolean(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ParamError(field, f"must be true or false, got {_found(value)}")
    return value


def names(
    field: str,
    value: object,
    *,
    allowed: Collection[str] | None = None,
    allow_empty: bool = True,
) -> tuple[str, ...]:
    """A list or tuple of non-empty strings (optionally from `allowed`), as a tuple."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ParamError(field, f"must be a list of strings, got {_found(value)}")
    if not value and not allow_empty:
        raise ParamError(field, "must not be empty")
    for item in value:
        if not isinstance(item, str) or not item:
            raise ParamError(field, f"items must be non-empty strings, got {_found(item)}")
        if allowed is not None and item not in allowed:
            choices = ", ".join(sorted(allowed))
            raise ParamError(field, f"unknown value {item!r}; expected one of: {choices}")
    return tuple(value)
