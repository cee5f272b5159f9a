"""Real sockets: a Messages request whose `context_management` asks the provider to clear
old tool uses keeps its tool results as sent (the provider clears them), and says so in
`x-curator-left-to-provider`; `clear_thinking` passes through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.policy import Policy
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.servers import ServerThread

pytestmark = pytest.mark.e2e

CLEAR_TOOLS = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 30000},
}
CLEAR_THINKING = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}


def truncating_policy() -> Policy:
    pins = SystemPreservation(pin_first_user=True)
    chain = Chain(
        (
            pins,
            ToolResultTruncation(max_tokens=100, keep_recent=1),
            TokenBudget(),
            ToolPairCoherence(),
        )
    )
    return Policy("truncating", chain, pins=pins.pin_spec())


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic()
    with ServerThread(fake.app) as upstream:
        config = Config(
            source="<e2e>",
            server=ServerConfig(),
            upstreams={"claude": UpstreamConfig("claude", upstream.origin, kind="anthropic")},
            policies={"truncating": truncating_policy()},
            routes=(Route("claude", "claude", "truncating"),),
        )
        with ServerThread(create_app(config, watch_interval_s=None)) as proxy:
            yield fake, proxy.origin


def history(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for i in range(steps):
        use = {"type": "tool_use", "id": f"toolu_c{i:03d}", "name": "read", "input": {"n": i}}
        text = "".join(f"row {n} of file {i}\n" for n in range(200))
        messages += [
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": text}],
            },
        ]
    return messages


def send(
    servers: tuple[FakeAnthropic, str], edits: list[dict[str, Any]] | None
) -> tuple[httpx.Response, dict[str, Any]]:
    fake, origin = servers
    fake.reset()
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 512, "messages": history(6)}
    if edits is not None:
        body["context_management"] = {"edits": edits}
    headers = {"x-api-key": "sk-ant-x", "anthropic-version": "2023-06-01"}
    response = httpx.post(origin + "/v1/messages", content=orjson.dumps(body), headers=headers)
    assert response.status_code == 200, response.text
    assert fake.rejected == []
    return response, orjson.loads(fake.requests[-1].body)


def test_without_edits_the_proxy_truncates_old_tool_results(
    servers: tuple[FakeAnthropic, str],
) -> None:
    response, sent = send(servers, None)
    assert "tool_result_truncation" in response.headers["x-curator-actions"]
    assert sent["messages"] != history(6)
    assert "x-curator-left-to-provider" not in response.headers


def test_clear_tool_uses_leaves_tool_results_to_the_provider(
    servers: tuple[FakeAnthropic, str],
) -> None:
    response, sent = send(servers, [CLEAR_TOOLS, CLEAR_THINKING])
    assert response.headers["x-curator-left-to-provider"] == "clear_tool_uses,clear_thinking"
    assert sent["messages"] == history(6)
    assert sent["context_management"] == {"edits": [CLEAR_TOOLS, CLEAR_THINKING]}
    assert "x-curator-actions" not in response.headers


def test_clear_thinking_alone_passes_through_and_curation_goes_on(
    servers: tuple[FakeAnthropic, str],
) -> None:
    response, sent = send(servers, [CLEAR_THINKING])
    assert response.headers["x-curator-left-to-provider"] == "clear_thinking"
    assert "tool_result_truncation" in response.headers["x-curator-actions"]
    assert sent["context_management"] == {"edits": [CLEAR_THINKING]}
