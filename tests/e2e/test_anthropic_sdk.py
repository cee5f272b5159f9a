"""The official `anthropic` SDK, unchanged but for `base_url`, through the proxy on loopback
to the strict fake Messages server: sync, async, streams, tools, extended thinking with
tool use, images, and a long tool loop that has to be curated. The fake refuses anything
Anthropic would; not one request may be refused."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, ToolUse
from tests.fakes.servers import ServerThread

MODEL = "claude-e2e"
WINDOW = 24_000
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d4944415478da63f8cfc0f01f0005000201a2dd4f8e0000000049454e44ae426082"
    )
).decode()


def agent_policy() -> Policy:
    pins = SystemPreservation(pin_first_user=True)
    chain = Chain(
        (
            pins,
            ToolResultTruncation(max_tokens=400, keep_recent=2),
            TokenBudget(),
            ToolPairCoherence(),
        )
    )
    return Policy("agent", chain, pins=pins.pin_spec())


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(windows={MODEL: WINDOW})
    with ServerThread(fake.app) as upstream:
        config = Config(
            source="<e2e>",
            server=ServerConfig(),
            upstreams={"claude": UpstreamConfig("claude", upstream.origin, kind="anthropic")},
            policies={"agent": agent_policy()},
            routes=(Route("claude", "claude", "agent"),),
            models=ModelTable.with_overrides([(f"{MODEL}*", ModelInfo(WINDOW))]),
        )
        with ServerThread(create_app(config, watch_interval_s=None)) as proxy:
            yield fake, proxy.origin


@pytest.fixture
def fake(servers: tuple[FakeAnthropic, str]) -> FakeAnthropic:
    servers[0].reset()
    return servers[0]


@pytest.fixture
def client(servers: tuple[FakeAnthropic, str]) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=servers[1], api_key="sk-ant-client", max_retries=0) as c:
        yield c


def test_sync_message_goes_through_curated(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "hi"}]
    )
    message = raw.parse()
    assert message.content[0].text == "Hello from the fake Anthropic upstream."  # type: ignore[union-attr]
    assert raw.headers["x-curator-route"] == "claude"
    assert raw.headers["x-curator-policy"] == "agent"
    # The client's own key goes through (as its SDK sent it: x-api-key or Authorization).
    sent = fake.requests[-1]
    assert "sk-ant-client" in (sent.header("x-api-key") or sent.header("authorization") or "")
    assert fake.requests[-1].header("anthropic-version")


def test_async_and_stream_with_thinking(
    fake: FakeAnthropic, servers: tuple[FakeAnthropic, str]
) -> None:
    async def run() -> list[str]:
        async with anthropic.AsyncAnthropic(
            base_url=servers[1], api_key="sk-ant-client", max_retries=0
        ) as client:
            fake.queue(Reply(text="async", thinking="quietly"))
            first = await client.messages.create(
                model=MODEL,
                max_tokens=2048,
                thinking=THINKING,
                messages=[{"role": "user", "content": "a"}],
            )
            fake.queue(Reply(text="streamed", thinking="aloud"))
            async with client.messages.stream(
                model=MODEL,
                max_tokens=2048,
                thinking=THINKING,
                messages=[{"role": "user", "content": "b"}],
            ) as stream:
                final = await stream.get_final_message()
            return [b.type for b in (*first.content, *final.content)]

    assert asyncio.run(run()) == ["thinking", "text", "thinking", "text"]
    assert fake.rejected == []


def _tool_loop(
    client: anthropic.Anthropic, fake: FakeAnthropic, steps: int, *, stream: bool
) -> list[Any]:
    """An agent: each step the model thinks, reads a file, and gets a long result (and a
    screenshot every few steps), the client marking its newest block for caching."""
    system = [
        {
            "type": "text",
            "text": "You are a careful agent. " * 40,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    tools = [
        {
            "name": "read",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    messages: list[Any] = [{"role": "user", "content": "Read every file and summarize them."}]
    heads = []
    for step in range(steps):
        fake.queue(
            Reply(
                text=f"step {step}",
                tool_uses=(ToolUse("read", {"path": f"f{step}.py"}),),
                thinking=f"think {step}",
            )
        )
        kwargs: Any = {
            "model": MODEL,
            "max_tokens": 2048,
            "thinking": THINKING,
            "system": system,
            "tools": tools,
            "messages": messages,
        }
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            raw = client.messages.with_raw_response.create(**kwargs)
            heads.append(raw.headers)
            message = raw.parse()
        assistant = [b.model_dump(exclude_none=True) for b in message.content]
        use = next(b for b in assistant if b["type"] == "tool_use")
        result: Any = [
            {"type": "text", "text": f"line {n} of file {step}\n" * 1 + "x = 1\n" * 150}
            for n in range(2)
        ]
        if step % 4 == 0:
            result.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                }
            )
        for old in messages:  # one breakpoint on the newest block, as Claude Code does
            if isinstance(old["content"], list):
                old["content"] = [
                    {k: v for k, v in b.items() if k != "cache_control"} for b in old["content"]
                ]
        messages += [
            {"role": "assistant", "content": assistant},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use["id"],
                        "content": result,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ]
    return heads


def test_a_long_tool_loop_with_thinking_images_and_caching_is_curated_and_never_refused(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    heads = _tool_loop(client, fake, 40, stream=False)
    assert fake.rejected == []
    assert len(fake.requests) == 40
    cut = [h for h in heads if int(h["x-curator-tokens-after"]) < int(h["x-curator-tokens-before"])]
    assert cut, "a 40-step loop over a 24k window must have been curated"
    assert any(u["cache_read_input_tokens"] > 0 for u in fake.usages)


def test_a_streamed_tool_loop_is_never_refused(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    _tool_loop(client, fake, 25, stream=True)
    assert fake.rejected == []
    assert len(fake.requests) == 25


def test_count_tokens_and_models_reach_the_anthropic_upstream(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    assert (
        client.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        ).input_tokens
        > 0
    )
    assert [m.id for m in client.models.list()] == ["claude-sonnet-4-5"]
    assert [r.path for r in fake.requests] == ["/v1/messages/count_tokens", "/v1/models"]
