"""Shared test setup: one token counter per process, hypothesis defaults, and the fixtures
every real-socket suite uses (each suite's conftest provides its own `fake_server`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from policies import bpe_files
from policies.tokens import TokenCounter
from tests import factories
from tests.fakes.servers import HOST
from tests.fakes.upstream import FakeOpenAI
from tests.postgres import fresh_dsn, pg_server  # noqa: F401 (fixtures: a real PostgreSQL)

# Curators tokenize real text, so examples are slower than hypothesis expects; the
# example counts are set per test, and no test may depend on timing.
settings.register_profile("curator", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("curator")


def pytest_configure() -> None:
    """Offline, tiktoken cannot download its BPE files; rs_bpe rebuilds them in its cache.

    The tests compare against tiktoken itself (and the fake upstream counts with it), so
    they need the files; a failed rebuild (no rs_bpe) leaves tiktoken to download them."""
    for name in bpe_files.FILES:
        bpe_files.ensure(name)


@pytest.fixture
def counter() -> TokenCounter:
    return factories.counter()


@pytest.fixture
def fake(fake_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    fake_server.reset()
    yield fake_server
    fake_server.reset()


@pytest.fixture(scope="session")
def dead_port() -> Iterator[int]:
    """A port that refuses connections: bound (so no one else takes it) but not listening."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        yield sock.getsockname()[1]
