"""Responses the client did not get in full are recorded as such, over real sockets: a
stream cut by an upstream reset or a read timeout, a client leaving mid-stream, and a stream
outliving the shutdown grace. Each audit record (JSONL and SQLite) says `incomplete` with its
reason, carries the error code and `truncated: true`, and the metric counts it."""

from __future__ import annotations

import re
import signal
import sqlite3
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from policies.policy import Policy
from proxy.config.audit import AuditConfig
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.support import (
    CHAT,
    WAIT_S,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    wait_for,
)
from tests.hardening.test_sigterm import Served

REPLY = "one two three four five six seven eight"
METRIC = "curator_responses_incomplete_total"


@pytest.fixture(params=["jsonl", "sqlite"])
def sink(request: pytest.FixtureRequest) -> str:
    param: str = request.param
    return param


@pytest.fixture
def proxy(fake: FakeOpenAI, tmp_path: Path, sink: str) -> Iterator[RunningProxy]:
    config = hardening_config(fake.origin, read_timeout_s=30.0)
    audit = AuditConfig(sink=sink, path=str(tmp_path / f"audit.{sink}"))  # type: ignore[arg-type]
    # A chat route with a real mode: `off` routes get no audit record.
    policies = {**config.policies, "plain": Policy("plain")}
    routes = tuple(replace(r, policy="plain") for r in config.routes)
    config = replace(config, audit=audit, policies=policies, routes=routes)
    with running_proxy(config) as running:
        yield running


def _audit_records(path: Path, sink: str, count: int) -> list[dict[str, Any]]:
    """The audit records once `count` are written (the writer thread is asynchronous)."""

    def read() -> list[dict[str, Any]]:
        if not path.exists():
            return []
        if sink == "jsonl":
            return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
        try:
            with sqlite3.connect(path) as db:
                rows = db.execute("SELECT fields FROM records ORDER BY seq").fetchall()
        except sqlite3.OperationalError:  # the writer has not created its tables yet
            return []
        return [orjson.loads(row[0]) for row in rows]

    wait_for(lambda: len(read()) >= count, f"{count} audit record(s)")
    return read()


def _incomplete_count(origin: str, reason: str) -> float:
    text = httpx.get(origin + "/metrics", timeout=WAIT_S).text
    pattern = rf'^{METRIC}\{{[^}}]*reason="{reason}"[^}}]*\}} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, flags=re.MULTILINE))


def _stream(origin: str, headers: dict[str, str] | None = None) -> tuple[httpx.Response, bytes]:
    with (
        httpx.Client(base_url=origin, timeout=30) as http,
        http.stream("POST", CHAT, content=chat_body(stream=True), headers=headers) as response,
    ):
        return response, b"".join(response.iter_raw())


def _assert_incomplete(record: dict[str, Any], reason: str, error: str | None) -> None:
    assert record["status"] == 200
    assert record["incomplete"] == reason
    assert record["error"] == error
    assert record["response"]["truncated"] is True


def test_a_stream_reset_by_the_upstream_is_recorded_incomplete(
    proxy: RunningProxy, fake: FakeOpenAI, tmp_path: Path, sink: str
) -> None:
    fake.queue(Behavior(reply=REPLY, abort_after=3))
    response, body = _stream(proxy.origin)
    assert b"event: error" in body
    (record,) = _audit_records(tmp_path / f"audit.{sink}", sink, 1)
    assert record["id"] == response.headers["x-curator-request-id"]
    _assert_incomplete(record, "upstream_error", "upstream_error")
    assert _incomplete_count(proxy.origin, "upstream_error") == 1


def test_a_stream_past_the_read_timeout_is_recorded_incomplete(
    proxy: RunningProxy, fake: FakeOpenAI, tmp_path: Path, sink: str
) -> None:
    # The `short` route allows 1 s of silence; the stream pauses longer after its 2nd chunk.
    fake.queue(Behavior(reply=REPLY, pause_after=2, pause_s=WAIT_S / 2))
    _, body = _stream(proxy.origin, {"x-route": "short"})
    assert b"upstream_timeout" in body
    (record,) = _audit_records(tmp_path / f"audit.{sink}", sink, 1)
    _assert_incomplete(record, "upstream_timeout", "upstream_timeout")
    assert _incomplete_count(proxy.origin, "upstream_timeout") == 1


def test_a_complete_stream_is_not_incomplete(
    proxy: RunningProxy, fake: FakeOpenAI, tmp_path: Path, sink: str
) -> None:
    fake.queue(Behavior(reply=REPLY))
    _, body = _stream(proxy.origin)
    assert body.endswith(b"data: [DONE]\n\n")
    (record,) = _audit_records(tmp_path / f"audit.{sink}", sink, 1)
    assert record["incomplete"] is None
    assert record["error"] is None
    assert record["response"]["truncated"] is False
    assert METRIC not in httpx.get(proxy.origin + "/metrics").text.replace(
        f"# HELP {METRIC}", ""
    ).replace(f"# TYPE {METRIC}", "")


def test_a_client_leaving_mid_stream_is_recorded_incomplete(
    proxy: RunningProxy, fake: FakeOpenAI, tmp_path: Path, sink: str
) -> None:
    never = threading.Event()
    fake.queue(Behavior(reply=REPLY, release=never))
    with (
        httpx.Client(base_url=proxy.origin, timeout=30) as http,
        http.stream("POST", CHAT, content=chat_body(stream=True)) as response,
    ):
        next(response.iter_raw())  # the first chunk, then the client hangs up
    assert fake.disconnected.wait(WAIT_S)
    (record,) = _audit_records(tmp_path / f"audit.{sink}", sink, 1)
    assert record["status"] == 200
    assert record["incomplete"] == "client_disconnect"
    assert record["error"] is None  # the client left: no failure of the proxy or upstream
    assert record["response"]["truncated"] is True
    assert _incomplete_count(proxy.origin, "client_disconnect") == 1
    assert not never.is_set()


def test_a_stream_cut_by_the_shutdown_grace_is_recorded_incomplete(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            server: {{shutdown_grace_s: 1}}
            upstreams:
              fake: {{base_url: "{fake.origin}/v1"}}
            policies:
              plain: preset:passthrough
            routes:
              - {{name: default, upstream: fake, policy: plain}}
            audit: {{sink: jsonl, path: audit.jsonl}}
            metrics: {{enabled: false}}
            """
        )
    )
    served = Served(config)
    never = threading.Event()
    fake.queue(Behavior(reply=REPLY, release=never))
    try:
        with (
            httpx.Client(base_url=served.origin, timeout=30) as http,
            http.stream("POST", CHAT, content=chat_body(stream=True)) as response,
        ):
            chunks = response.iter_raw()
            next(chunks)
            served.proc.send_signal(signal.SIGTERM)
            with pytest.raises(httpx.RemoteProtocolError):
                b"".join(chunks)
        assert served.proc.wait(WAIT_S * 2) == 0
    finally:
        served.stop()
    (record,) = _audit_records(tmp_path / "audit.jsonl", "jsonl", 1)
    assert record["id"] == response.headers["x-curator-request-id"]
    _assert_incomplete(record, "shutdown", "shutdown")
