"""Real sockets: the `chat` preset on an agent-like run (one user message, the task, then
more tool calls than its 100-message cap) never drops the task, against an upstream that
counts differently from the proxy (openai SDK)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from policies.loader import load_preset
from policies.models import ModelInfo, ModelTable
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import ServerThread
from tests.fakes.skewed import SkewedUpstream

pytestmark = pytest.mark.e2e

MODEL = "house-chat-e2e"
WINDOW = 8192
TASK = "Find why tests/test_io.py fails and fix it."
CALLS = 60


@pytest.fixture
def skewed() -> Iterator[SkewedUpstream]:
    fake = SkewedUpstream(MODEL, WINDOW, factor=1.03, per_message=2)
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def proxy(skewed: SkewedUpstream) -> Iterator[str]:
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams={"skewed": UpstreamConfig("skewed", skewed.origin + "/v1")},
        policies={"chat": load_preset("chat")},
        routes=(Route("default", "skewed", "chat"),),
        models=ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW))]),
    )
    options = {**uvicorn_options(), "log_level": "warning"}
    with ServerThread(create_app(config), **options) as server:
        yield server.origin


def agent_run(calls: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": TASK},
    ]
    for i in range(calls):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "run", "arguments": f'{{"cmd": "pytest -k case_{i}"}}'},
        }
        output = "".join(f"case_{i}_{k} ... passed ({k * 7 % 13} ms)\n" for k in range(9))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": output})
    return messages


def test_the_chat_preset_keeps_the_task_of_an_agent_run(proxy: str, skewed: SkewedUpstream) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=agent_run(CALLS),  # type: ignore[arg-type]
        max_tokens=512,
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-curator-actions"]  # the window forced cuts
    sent = skewed.received[-1]["messages"]
    assert len(sent) < len(agent_run(CALLS))
    assert sent[:2] == agent_run(0)
    assert [m["role"] for m in sent].count("user") == 1
