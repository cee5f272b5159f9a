"""Shared test setup: one token counter per process, and hypothesis defaults."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from policies.tokens import TokenCounter
from tests import factories

# Curators tokenize real text, so examples are slower than hypothesis expects; the
# example counts are set per test, and no test may depend on timing.
settings.register_profile("curator", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("curator")


@pytest.fixture
def counter() -> TokenCounter:
    return factories.counter()
