"""The redaction benchmark's inputs, checked for what they produce at 1 MiB (no timing:
bench/redact_bench.py prints the scaling ratios)."""

from __future__ import annotations

import pytest

from bench.redact_bench import FAMILIES, SECRET_UNITS, SIZES, doublings
from proxy.observability.audit.redact import Redactor

LARGEST = SIZES[-1]


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor.build()


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_megabyte_of_each_family_is_redacted_completely(redactor: Redactor, name: str) -> None:
    text = FAMILIES[name](LARGEST)
    assert len(text) >= LARGEST
    out = redactor.text(text)
    assert len(out) <= 2 * len(text)
    unit = SECRET_UNITS.get(name)
    if unit is not None:  # every whole copy of the eight secrets was caught
        assert out.count("[REDACTED:") >= 8 * (len(text) // len(unit))


def test_doubling_ratios() -> None:
    assert doublings([1.0, 2.0, 8.0]) == [2.0, 4.0]
    assert doublings([0.0, 1.0])[0] > 1e6  # a zero first time cannot hide a jump
