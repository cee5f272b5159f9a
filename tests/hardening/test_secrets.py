"""Keys are never reflected: after successes, upstream failures of every phase, proxy errors
and refused requests, neither the upstream key nor a proxy key appears in any response
header or body, in the logs, in /metrics or in the audit log."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import httpx
import pytest

from proxy.config.audit import AuditConfig
from proxy.config.auth import AuthConfig
from proxy.config.limits import Limits
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.support import (
    CHAT,
    PROXY_KEY,
    UPSTREAM_KEY,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    wait_for,
)

AUTH = MappingProxyType({"authorization": f"Bearer {PROXY_KEY}"})
SECRETS = (UPSTREAM_KEY, PROXY_KEY, UPSTREAM_KEY[8:24], PROXY_KEY[8:24])
"""The keys, and pieces of them long enough to identify them."""


@pytest.fixture
def proxy(fake: FakeOpenAI, dead_port: int, tmp_path: Path) -> Iterator[RunningProxy]:
    config = hardening_config(
        fake.origin,
        dead_port=dead_port,
        auth=AuthConfig(keys=(PROXY_KEY,)),
        limits=Limits(max_body_mb=1),
    )
    audit = AuditConfig(sink="jsonl", path=str(tmp_path / "audit.jsonl"))
    with running_proxy(replace(config, audit=audit)) as running:
        yield running


def _exchanges(http: httpx.Client, fake: FakeOpenAI) -> list[httpx.Response]:
    """One of every kind of answer, each through a route with the upstream key."""
    keyed, short, dead = ({"x-route": r, **AUTH} for r in ("keyed", "short", "dead"))
    fake.queue(
        Behavior(),  # plain success
        Behavior(reply="streamed reply"),
        Behavior(reply="cut short", abort_after=2),
        Behavior(stall_s=30),
        Behavior(status=401, body=b'{"error":{"message":"Incorrect API key provided"}}'),
        Behavior(status=500, body=b'{"error":{"message":"boom"}}'),
    )
    responses = [http.post(CHAT, content=chat_body(), headers=keyed)]
    for _ in range(2):
        with http.stream("POST", CHAT, content=chat_body(stream=True), headers=keyed) as r:
            r.read()
        responses.append(r)
    responses.append(http.post(CHAT, content=chat_body(), headers=short))  # 504
    responses += [http.post(CHAT, content=chat_body(), headers=keyed) for _ in range(2)]
    responses.append(http.post(CHAT, content=chat_body(), headers=dead))  # 502
    responses.append(http.post(CHAT, content=b"x" * (2 << 20), headers=keyed))  # 413
    responses.append(http.post(CHAT, content=chat_body(), headers={"x-route": "keyed"}))  # 401
    responses.append(http.get("/v1/models", headers={**AUTH, "x-route": "keyed"}))
    return responses


def _assert_absent(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a key appeared in {where}"


def test_no_key_is_ever_reflected(
    proxy: RunningProxy, fake: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with httpx.Client(base_url=proxy.origin, timeout=30) as http:
        responses = _exchanges(http, fake)
        metrics = http.get("/metrics", headers=AUTH)
    statuses = [r.status_code for r in responses]
    assert statuses == [200, 200, 200, 504, 401, 500, 502, 413, 401, 200]
    for response in responses:
        _assert_absent("a response", str(response.headers.raw) + response.text)
    # The upstream did get its key, on every request that reached it: the check above is
    # about where it must not show, not about it being missing.
    assert {r.header("authorization") for r in fake.requests} == {f"Bearer {UPSTREAM_KEY}"}
    assert metrics.status_code == 200
    assert "curator_" in metrics.text
    _assert_absent("/metrics", metrics.text)
    records = proxy.wait_records(8)  # the two refused by the guard are not exchanges
    wait_for(lambda: _audit_lines(tmp_path) >= 6, "the audit writer")
    _assert_absent("the audit log", (tmp_path / "audit.jsonl").read_text())
    logs = _proxy_side(caplog.records)
    assert any("upstream failed" in line for line in logs)
    _assert_absent("the proxy's logs", "\n".join(logs))
    _assert_absent("the exchange records", "".join(map(repr, records)))


CLIENT_LOGGERS = ("httpx", "httpcore")
"""The test's own HTTP client logs the headers it sends, proxy key included."""


def _proxy_side(records: list[logging.LogRecord]) -> list[str]:
    """Every proxy-side record as a handler would write it, tracebacks included."""
    formatter = logging.Formatter("%(name)s %(message)s")
    return [formatter.format(r) for r in records if not r.name.startswith(CLIENT_LOGGERS)]


def _audit_lines(tmp_path: Path) -> int:
    path = tmp_path / "audit.jsonl"
    return len(path.read_bytes().splitlines()) if path.exists() else 0
