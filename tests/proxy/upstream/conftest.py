"""Fixtures for the upstream clients' tests: asyncio only (aiohttp is asyncio-only), and a
scripted loopback upstream per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.proxy.upstream.scripted import ScriptedUpstream


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server
