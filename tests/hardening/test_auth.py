"""Proxy keys over real sockets: 401s in OpenAI's shape, constant-time comparison, and a
proxy key that never travels upstream."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import orjson
import pytest

from proxy.config.audit import AuditConfig
from proxy.config.auth import AuthConfig
from proxy.observability.audit.stamps import key_fingerprint
from proxy.serving.guard import KeyRing
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.support import (
    CHAT,
    PROXY_KEY,
    UPSTREAM_KEY,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
)

OTHER_KEY = "ck-second-key-for-rotation-000111"
KEYS = AuthConfig(keys=(PROXY_KEY, OTHER_KEY))


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    with running_proxy(hardening_config(fake.origin, auth=KEYS)) as running:
        yield running


@pytest.fixture
def http(proxy: RunningProxy) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.origin, timeout=30) as client:
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        _bearer("ck-wrong"),
        _bearer(PROXY_KEY[:-1]),
        _bearer(PROXY_KEY + "x"),
        {"authorization": PROXY_KEY},  # no scheme
        {"authorization": f"Basic {PROXY_KEY}"},
        {"authorization": "Bearer"},
        {"x-api-key": "ck-wrong"},  # x-api-key is read too (Anthropic clients): a wrong one
    ],
    ids=["none", "wrong", "prefix", "longer", "no-scheme", "basic", "empty", "other-header"],
)
def test_a_missing_or_wrong_key_gets_401_invalid_proxy_key(
    http: httpx.Client, fake: FakeOpenAI, headers: dict[str, str]
) -> None:
    response = http.post(CHAT, content=chat_body(), headers=headers)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_proxy_key"
    assert set(error) == {"message", "type", "param", "code"}
    assert response.headers["www-authenticate"] == "Bearer"
    assert PROXY_KEY not in response.text
    assert "ck-wrong" not in response.text
    assert fake.requests == []


@pytest.mark.parametrize("key", [PROXY_KEY, OTHER_KEY])
def test_any_configured_key_is_accepted_and_never_forwarded(
    http: httpx.Client, fake: FakeOpenAI, key: str
) -> None:
    response = http.post(CHAT, content=chat_body(), headers=_bearer(key))
    assert response.status_code == 200
    # No upstream api_key: a proxy key is not an upstream credential, so nothing is sent.
    assert fake.last.header("authorization") is None
    assert key.encode() not in b"".join(v for _, v in fake.last.headers)


def test_azure_clients_may_send_the_key_as_api_key(http: httpx.Client, fake: FakeOpenAI) -> None:
    response = http.post(CHAT, content=chat_body(), headers={"api-key": PROXY_KEY})
    assert response.status_code == 200
    assert fake.last.header("api-key") is None
    assert fake.last.header("authorization") is None


def test_a_right_api_key_does_not_excuse_a_wrong_authorization(http: httpx.Client) -> None:
    headers = {"api-key": PROXY_KEY, "authorization": "Bearer ck-wrong"}
    assert http.post(CHAT, content=chat_body(), headers=headers).status_code == 401


def test_the_scheme_is_case_insensitive(http: httpx.Client) -> None:
    response = http.get("/v1/models", headers={"authorization": f"bearer {PROXY_KEY}"})
    assert response.status_code == 200


def test_an_upstream_api_key_replaces_the_proxy_key(http: httpx.Client, fake: FakeOpenAI) -> None:
    headers = {**_bearer(PROXY_KEY), "x-route": "keyed"}
    response = http.post(CHAT, content=chat_body(), headers=headers)
    assert response.status_code == 200
    assert fake.last.header("authorization") == f"Bearer {UPSTREAM_KEY}"


def test_every_path_but_healthz_needs_a_key(http: httpx.Client, fake: FakeOpenAI) -> None:
    assert http.get("/healthz").status_code == 200
    for path in ("/v1/models", "/v1/embeddings", "/metrics", "/nowhere"):
        assert http.get(path).status_code == 401, path
    assert fake.requests == []


def test_rejected_requests_are_not_exchanges(http: httpx.Client, proxy: RunningProxy) -> None:
    http.post(CHAT, content=chat_body())
    http.post(CHAT, content=chat_body(), headers=_bearer(PROXY_KEY))
    records = proxy.wait_records(1)
    assert [r.status for r in records] == [200]


def test_without_keys_the_client_authorization_passes_through(fake: FakeOpenAI) -> None:
    with (
        running_proxy(hardening_config(fake.origin)) as proxy,
        httpx.Client(base_url=proxy.origin) as http,
    ):
        response = http.post(CHAT, content=chat_body(), headers=_bearer("sk-client-own"))
    assert response.status_code == 200
    assert fake.last.header("authorization") == "Bearer sk-client-own"


# -- the comparison itself -----------------------------------------------------------------
def test_every_key_is_compared_even_after_a_match(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    ring = KeyRing(["k-first", "k-second", "k-third"])
    assert ring.accepts(b"Bearer k-first")
    assert len(calls) == 3
    calls.clear()
    assert not ring.accepts(None)
    assert len(calls) == 3


def test_keys_are_compared_as_fixed_length_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    lengths: set[int] = set()
    compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        lengths.update((len(a), len(b)))
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    ring = KeyRing(["short", "a-much-longer-proxy-key-" * 4])
    for presented in (b"Bearer x", b"Bearer " + b"y" * 500, b"", b"Bearer short"):
        ring.accepts(presented)
    assert lengths == {32}  # SHA-256: neither length nor content of a key shows


def test_an_empty_ring_accepts_nothing() -> None:
    ring = KeyRing([])
    assert not ring
    assert not ring.accepts(b"Bearer ")
    assert not ring.accepts(b"Bearer anything")


def test_the_audit_fingerprints_the_proxy_key_each_request_came_in_with(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    audit = AuditConfig(sink="jsonl", path=str(tmp_path / "audit.jsonl"))
    config = replace(hardening_config(fake.origin, auth=KEYS), audit=audit)
    sent = [_bearer(PROXY_KEY), _bearer(OTHER_KEY), {"api-key": PROXY_KEY}]
    with running_proxy(config) as proxy, httpx.Client(base_url=proxy.origin, timeout=30) as http:
        for headers in sent:
            assert http.post(CHAT, content=chat_body(), headers=headers).status_code == 200
    clients = [key_fingerprint(r.authorization) for r in proxy.records]
    assert clients == [key_fingerprint(k) for k in (PROXY_KEY, OTHER_KEY, PROXY_KEY)]
    text = (tmp_path / "audit.jsonl").read_text()
    assert [orjson.loads(line)["client"] for line in text.splitlines()] == clients
    assert PROXY_KEY not in text
