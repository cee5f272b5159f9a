"""Fixtures shared by the policies tests."""

from __future__ import annotations

import pytest

from policies.tokens import TokenCounter


@pytest.fixture(scope="session")
def exact() -> TokenCounter:
    """A counter with tiktoken's real encodings (skips the test when they cannot load)."""
    counter = TokenCounter(load_timeout_s=60)
    counter.preload("gpt-4o", "gpt-4")
    if counter.fallbacks:
        pytest.skip("tiktoken's BPE files are unavailable: set TIKTOKEN_CACHE_DIR")
    return counter
