"""Shared test setup: one token counter per process, hypothesis defaults, and the fixtures
every real-socket suite uses (each suite's conftest provides its own `fake_server`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from policies import bpe_files
from policies.tokens import TokenCounter
from proxy.upstream.models import UpstreamWindows
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


_REFRESH = UpstreamWindows.refresh


@pytest.fixture(scope="session", autouse=True)
def _no_window_discovery() -> Iterator[None]:
    """The proxy reads each upstream's model list at start (`proxy.upstream.models`); tests
    that count or inspect what the upstream received expect only the client's requests, so
    in-process proxies discover nothing unless a test asks for `window_discovery`. Session
    scope: proxies started by module- and session-scoped fixtures are covered too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(UpstreamWindows, "refresh", lambda *_args: None)
        yield


@pytest.fixture
def window_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets the proxies this test starts read their upstreams' model lists."""
    monkeypatch.setattr(UpstreamWindows, "refresh", _REFRESH)


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
