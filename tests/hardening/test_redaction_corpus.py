"""The redaction corpus: every built-in secret kind, planted everywhere a client or an
upstream can put text, leaves zero hits in the audit log, the logs and /metrics.

Two levels. The audit record builder is driven directly for the exhaustive part: a secret
split between two streamed deltas at every offset, and a stream's bytes split at every
offset. Then the wired proxy, over real sockets, with each sink: system, user and tool
messages, JSON-escaped tool arguments, a streamed reply split mid-secret, an upstream error
body, and request and response headers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.config.audit import AuditConfig
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.protocols.chat.assembly import assemble
from tests.factories import audited
from tests.hardening.corpus import BUILTIN_KINDS, SECRETS, Secret, found_in
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    hardening_config,
    running_proxy,
    upstream_server,
    wait_for,
)
from tests.hardening.upstreams import Scripted, ScriptedUpstream, sse_events


def test_the_corpus_covers_every_builtin_kind() -> None:
    assert {s.kind for s in SECRETS} == BUILTIN_KINDS
    for secret in SECRETS:  # and each secret is caught, whole, by its own detector
        assert Redactor.build().text(f"x {secret.value} y") != f"x {secret.value} y"


# -- the record builder, exhaustively ------------------------------------------------------
def _record(response: BodyCapture | bytes, messages: list[dict[str, Any]] | None = None) -> str:
    builder = RecordBuilder(Redactor.build(), store_responses=True)
    entry = audited(id="r", time=0.0, original=messages or [], response=response, status=200)
    return builder.build(entry).to_json().decode()


def _stream(*deltas: dict[str, Any]) -> bytes:
    return b"".join(sse_events(*deltas))


def _fed(raw: bytes, *cuts: int) -> BodyCapture:
    acc = BodyCapture()
    edges = [0, *cuts, len(raw)]
    for start, end in itertools.pairwise(edges):
        acc.feed(raw[start:end])
    return acc


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.kind)
def test_a_secret_split_between_deltas_at_every_offset(secret: Secret) -> None:
    text = secret.value
    for k in range(len(text) + 1):
        raw = _stream({"content": "here: " + text[:k]}, {"content": text[k:] + " done"})
        stored = _record(_fed(raw, len(raw) // 2))
        assert found_in(stored) == [], f"split at {k}"
        assert f"[REDACTED:{secret.kind}]" in stored


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.kind)
def test_a_stream_split_at_every_byte_offset(secret: Secret) -> None:
    raw = _stream({"content": "a key: "}, {"content": secret.value}, {"content": " ok"})
    for cut in range(len(raw) + 1):
        stored = _record(_fed(raw, cut))
        assert found_in(stored) == [], f"cut at byte {cut}"


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.kind)
def test_streamed_tool_arguments_split_at_every_offset(secret: Secret) -> None:
    arguments = orjson.dumps({"token": secret.value, "note": "escaped as JSON"}).decode()
    for k in range(len(arguments) + 1):
        call = {"index": 0, "id": "call_1", "type": "function"}
        first = {"tool_calls": [{**call, "function": {"name": "f", "arguments": arguments[:k]}}]}
        second = {"tool_calls": [{"index": 0, "function": {"arguments": arguments[k:]}}]}
        stored = _record(_fed(_stream(first, second), 7 * k % 50))
        assert found_in(stored) == [], f"split at {k}"


def _conversation(secret: str) -> list[dict[str, Any]]:
    arguments = orjson.dumps({"cmd": f"deploy --key {secret}"}).decode()
    call = {"id": "call_1", "type": "function", "function": {"name": "sh", "arguments": arguments}}
    return [
        {"role": "system", "content": f"Use {secret} for the registry."},
        {"role": "user", "content": [{"type": "text", "text": f"my key is {secret}"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": orjson.dumps({"env": secret}).decode(),
        },
        {"role": "user", "content": f"again: {secret}"},
    ]


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s.kind)
def test_secrets_in_every_message_kind_and_in_error_bodies(secret: Secret) -> None:
    messages = _conversation(secret.value)
    assert found_in(_record(b"{}", messages)) == []
    error = orjson.dumps({"error": {"message": f"bad key {secret.value}", "param": None}})
    builder = RecordBuilder(Redactor.build())
    entry = audited(id="e", time=0.0, original=messages, response=error, status=401)
    assert found_in(builder.build(entry).to_json().decode()) == []


# -- the wired proxy, over real sockets -------------------------------------------------------
ALL = " | ".join(s.value for s in SECRETS)
HEADER_SECRETS = tuple(s for s in SECRETS if "\n" not in s.value)


def _answers() -> list[Scripted]:
    """A reply streaming every secret split mid-way, then an error body full of them."""
    deltas = [{"role": "assistant", "content": ""}]
    for secret in SECRETS:
        half = len(secret.value) // 2
        deltas += [{"content": f"{secret.kind}: {secret.value[:half]}"}]
        deltas += [{"content": secret.value[half:] + "\n"}]
    leaky = tuple((f"x-leak-{i}".encode(), s.value.encode()) for i, s in enumerate(HEADER_SECRETS))
    error = orjson.dumps({"error": {"message": f"rejected: {ALL}", "type": "invalid_request"}})
    return [
        Scripted(tuple(sse_events(*deltas)), headers=leaky),
        Scripted((error,), status=400, content_type=b"application/json"),
    ]


@pytest.fixture(params=["jsonl", "sqlite"])
def wired(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunningProxy, Path]]:
    upstream = ScriptedUpstream(*_answers())
    sink = request.param
    path = tmp_path / f"audit.{sink}"
    with upstream_server(upstream) as server:
        config = hardening_config(server.origin)
        config = replace(config, audit=AuditConfig(sink=sink, path=str(path)))
        with running_proxy(config) as proxy:
            yield proxy, path


def _stored(tmp_path: Path) -> str:
    """Every byte the audit sink wrote (SQLite's WAL included), as text."""
    return "".join(p.read_bytes().decode("latin-1") for p in sorted(tmp_path.glob("audit.*")))


def test_the_wired_proxy_stores_and_shows_no_secret(
    wired: tuple[RunningProxy, Path], caplog: pytest.LogCaptureFixture
) -> None:
    proxy, path = wired
    caplog.set_level(logging.DEBUG, logger="curator")
    headers = {s.kind: s.value for s in HEADER_SECRETS}
    headers["authorization"] = f"Bearer {SECRETS[0].value}"
    body = {"model": "gpt-4o", "messages": _conversation(ALL), "user": ALL, "stream": True}
    with httpx.Client(base_url=proxy.origin, timeout=30, headers=headers) as http:
        with http.stream("POST", CHAT, content=orjson.dumps(body)) as response:
            streamed = response.read()
        # The client gets the upstream's reply as it was: redaction is for what is stored.
        assert found_in(assemble(streamed).text) == [s.kind for s in SECRETS]
        body["stream"] = False
        assert http.post(CHAT, content=orjson.dumps(body)).status_code == 400
        metrics = http.get("/metrics").text
    proxy.wait_records(2)
    wait_for(lambda: _count(path) == 2, "two audit records")
    stored = _stored(path.parent)
    assert stored.count("[REDACTED:") >= len(SECRETS)
    assert found_in(stored) == []
    assert found_in(metrics) == []
    assert found_in(caplog.text) == []


def _count(path: Path) -> int:
    if path.suffix == ".jsonl":
        return len(path.read_bytes().splitlines()) if path.exists() else 0
    import sqlite3

    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        table = next((t for t in tables if "request" in t or "record" in t), None)
        return int(db.execute(f"select count(*) from {table}").fetchone()[0]) if table else 0
