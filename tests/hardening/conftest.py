"""Shared servers for the fault and abuse suite: the strict fake upstream and a dead port.
Each test starts its own proxy (support.running_proxy) with the limits and keys it needs,
so connection counts start from zero.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import upstream_server


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(windows={"gpt-4o": 128_000})
    with upstream_server(fake.app) as server:
        fake.origin = server.origin
        yield fake
