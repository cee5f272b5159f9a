"""The audit queue is bounded in bytes too, over real sockets: with the store unavailable,
records wait only up to `audit.max_queue_bytes` (their requests and responses as relayed);
past it each is dropped and counted (`curator_audit_records_total{result="dropped"}`),
while every request is still answered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from proxy.config.audit import AuditConfig
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import (
    CHAT,
    chat_body,
    hardening_config,
    running_proxy,
    upstream_server,
    wait_for,
)

MB = 2**20


@pytest.fixture
def roomy() -> Iterator[FakeOpenAI]:
    """An upstream whose models take a 1 MiB prompt."""
    fake = FakeOpenAI(default_window=10**7)
    with upstream_server(fake.app) as server:
        fake.origin = server.origin
        yield fake


def _dropped(http: httpx.Client) -> float:
    text = http.get("/metrics").text
    found = re.search(r'^curator_audit_records_total\{result="dropped"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_past_max_queue_bytes_records_are_dropped_and_counted(
    roomy: FakeOpenAI, dead_port: int
) -> None:
    # PostgreSQL on a port nobody listens on: the store is unavailable, records wait.
    dsn = f"postgresql://curator@127.0.0.1:{dead_port}/audit"
    audit = AuditConfig(sink="postgres", path=dsn, max_queue_bytes=4 * MB)
    config = replace(hardening_config(roomy.origin), audit=audit)
    body = chat_body("lorem ipsum " * (MB // 12 + 1))  # a little over 1 MiB
    with running_proxy(config) as proxy, httpx.Client(base_url=proxy.origin, timeout=30) as http:
        for _ in range(12):
            response = http.post(CHAT, content=body)
            assert response.status_code == 200, response.text
        # Three wait (4 MiB), held or queued; each of the other nine is dropped.
        wait_for(lambda: _dropped(http) >= 9, "9 dropped records")
        assert _dropped(http) == 9
        assert http.get("/healthz").json()["audit"]["state"] == "degraded"
