"""Real sockets: an upstream overflow on a curated request is rescued before the client
sees a byte (openai SDK), and audited as two attempts."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from policies.models import ModelInfo, ModelTable
from proxy.config.audit import AuditConfig
from proxy.config.loader import Config, Route, RouteMatch, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.e2e.conftest import agent_policy
from tests.e2e.test_upstream_counts import TOOLS, file_text
from tests.fakes.servers import ServerThread
from tests.fakes.skewed import SkewedUpstream

pytestmark = pytest.mark.e2e

MODEL = "house-coder-rescue"
WINDOW = 8192


@pytest.fixture
def skewed() -> Iterator[SkewedUpstream]:
    # Counts a quarter more than we do: a long first request overflows before any
    # response has taught the calibration.
    fake = SkewedUpstream(MODEL, WINDOW, factor=1.25, per_message=3, per_tool=10)
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def proxy(skewed: SkewedUpstream, tmp_path: Path) -> Iterator[str]:
    passing = dataclasses.replace(agent_policy(), name="passing", on_upstream_overflow="pass")
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams={"skewed": UpstreamConfig("skewed", skewed.origin + "/v1")},
        policies={"agent": agent_policy(), "passing": passing},
        routes=(
            Route("pass", "skewed", "passing", RouteMatch(headers=(("x-e2e-route", "pass"),))),
            Route("default", "skewed", "agent"),
        ),
        models=ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW))]),
        audit=AuditConfig(sink="sqlite", path=str(tmp_path / "audit.db")),
    )
    options = {**uvicorn_options(), "log_level": "warning"}
    with ServerThread(create_app(config), **options) as server:
        yield server.origin


def audit_rows(db: Path, request_id: str) -> list[tuple[int, str | None, str]]:
    """Both attempts' audit records (status, linked-attempt mode, id), once written: the
    writer thread stores them shortly after the response (bounded wait)."""
    query = (
        "SELECT status, CASE WHEN parent_id IS NULL THEN NULL ELSE 'rescued' END, id "
        "FROM records WHERE id = ? OR parent_id = ? ORDER BY status"
    )
    for _ in range(400):
        try:
            with sqlite3.connect(db) as conn:
                rows = conn.execute(query, (request_id, request_id)).fetchall()
        except sqlite3.OperationalError:  # the writer has not created its tables yet
            rows = []
        if len(rows) == 2:
            return rows
        time.sleep(0.025)
    raise AssertionError(f"audit records of {request_id} were not written")


def long_history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing handler."},
    ]
    for i in range(turns):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/m{i}.py"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": file_text(i)})
    return messages


def test_an_upstream_overflow_is_rescued_before_the_client_sees_it(
    proxy: str, skewed: SkewedUpstream, tmp_path: Path
) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=long_history(40),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=512,
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-curator-rescued"] == "1"
    assert skewed.statuses == [400, 200]
    first, second = (int(n) for n in skewed.counted)
    assert second < first
    assert int(raw.headers["x-curator-tokens-after"]) < int(raw.headers["x-curator-tokens-before"])
    rows = audit_rows(tmp_path / "audit.db", raw.headers["x-curator-request-id"])
    assert [(status, linked) for status, linked, _ in rows] == [(200, None), (400, "rescued")]
    # The rejection taught the calibration: the next long request goes through at once.
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=long_history(45),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=512,
    )
    assert "x-curator-rescued" not in raw.headers
    assert skewed.statuses == [400, 200, 200]
    metrics = httpx.get(proxy + "/metrics").text
    assert 'curator_upstream_overflows_total{result="retried",upstream="skewed"} 1.0' in metrics


def test_on_upstream_overflow_pass_relays_the_error(proxy: str, skewed: SkewedUpstream) -> None:
    client = OpenAI(
        base_url=proxy + "/v1",
        api_key="sk-e2e",
        max_retries=0,
        default_headers={"x-e2e-route": "pass"},
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL,
            messages=long_history(40),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            max_tokens=512,
        )
    assert caught.value.code == "context_length_exceeded"
    assert skewed.statuses == [400]
