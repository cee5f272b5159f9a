"""The official openai SDK through the proxy to the strict fake: sync, async, streaming, and a
tool-calling agent loop whose history outgrows a small context window."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
import tiktoken
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from bench.tools import TOOLS, tool_output
from tests.e2e.conftest import KEEP_RECENT, SMALL_MODEL, SMALL_WINDOW, TOOL_MAX_TOKENS
from tests.fakes import openai_rules
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.e2e

REPLY = "The build is green again."
ENCODING = tiktoken.get_encoding("o200k_base")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_sync_completion(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    completion = openai_client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Is the build green?"}]
    )
    assert completion.choices[0].message.content == REPLY
    assert fake.last.json()["messages"] == [{"role": "user", "content": "Is the build green?"}]
    assert fake.last.header("authorization") == "Bearer sk-client-e2e"


@pytest.mark.anyio
async def test_async_completion(proxy_origin: str, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    async with AsyncOpenAI(base_url=proxy_origin + "/v1", api_key="sk-a", max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Status?"}]
        )
    assert completion.choices[0].message.content == REPLY
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0


def test_streaming_with_usage(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    stream = openai_client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Status?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == REPLY
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


@pytest.mark.usefixtures("fake")
def test_raw_response_carries_curator_headers(openai_client: OpenAI) -> None:
    raw = openai_client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
    )
    headers = raw.headers
    assert len(headers["x-curator-request-id"]) == 32
    assert headers["x-curator-route"] == "default"
    assert headers["x-curator-policy"] == "agent"
    assert int(headers["x-curator-tokens-before"]) == int(headers["x-curator-tokens-after"]) > 0
    assert raw.parse().choices[0].message.content


# -- the agent loop ----------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "You are a coding agent. Read before you edit."}
TASK = {"role": "user", "content": "The nightly reconcile job crashes. Find and fix the cause."}
STEPS = 12
OUTPUT_CHARS = 6_000


def _tool_calls(rng: random.Random, step: int) -> tuple[ToolCall, ...]:
    names = ("read_file", "run_tests") if step % 2 else ("grep", "read_file")
    calls = []
    for k, name in enumerate(names):
        args, _ = tool_output(rng, name, big=False, min_bytes=0)
        calls.append(ToolCall(name, orjson.dumps(args).decode(), f"call_{step}_{k}"))
    return tuple(calls)


def _run_agent(client: OpenAI, fake: FakeOpenAI) -> tuple[list[dict[str, Any]], list[Any]]:
    """Run the loop; returns the client's full history and each step's raw response."""
    rng = random.Random(11)
    messages: list[dict[str, Any]] = [SYSTEM, TASK]
    raws = []
    for step in range(STEPS):
        fake.queue(Behavior(tool_calls=_tool_calls(rng, step)))
        raw = client.chat.completions.with_raw_response.create(
            model=SMALL_MODEL,
            messages=messages,  # type: ignore[arg-type]  # plain dicts, as agents send them
            tools=TOOLS,  # type: ignore[arg-type]
        )
        raws.append(raw)
        reply = raw.parse().choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or ():
            assert isinstance(call, ChatCompletionMessageFunctionToolCall)
            _, output = tool_output(rng, call.function.name, big=True, min_bytes=OUTPUT_CHARS)
            # About 2k tokens each: the history outgrows the window in a few steps, while
            # the newest block alone still fits it.
            content = output[: OUTPUT_CHARS + rng.randrange(2_000)]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    fake.queue(Behavior(reply="Fixed: the tenant lookup now handles None."))
    raws.append(
        client.chat.completions.with_raw_response.create(
            model=SMALL_MODEL,
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
        )
    )
    return messages, raws


def _derived_in_order(sent: list[dict[str, Any]], original: list[dict[str, Any]]) -> bool:
    """Every sent message matches a later original than the one before (same identity)."""
    j = 0
    for msg in sent:
        while j < len(original) and not _same_identity(msg, original[j]):
            j += 1
        if j == len(original):
            return False
        j += 1
    return True


def _same_identity(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("role", "tool_call_id", "name")
    if any(a.get(k) != b.get(k) for k in keys):
        return False
    ids = [c["id"] for c in a.get("tool_calls", [])]
    return ids == [c["id"] for c in b.get("tool_calls", [])][: len(ids)] or a == b


def test_agent_loop_overflowing_a_small_window(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    history, raws = _run_agent(openai_client, fake)
    assert [r.http_response.status_code for r in raws] == [200] * (STEPS + 1)

    # Without the proxy, the strict upstream would have refused the final request.
    final_body = {"model": SMALL_MODEL, "messages": history, "tools": TOOLS}
    assert openai_rules.check_request(final_body, ENCODING, SMALL_WINDOW) is not None

    sent = fake.last.json()["messages"]
    assert sent[:2] == [SYSTEM, TASK]  # pins verbatim, in place
    newest_block = history[-(1 + KEEP_RECENT) :]
    assert sent[-len(newest_block) :] == newest_block  # the newest unit verbatim
    assert _derived_in_order(sent, history)
    assert len(sent) < len(history)

    tool_results = [m for m in sent if m["role"] == "tool"]
    for older in tool_results[:-KEEP_RECENT]:
        assert len(ENCODING.encode_ordinary(older["content"])) <= TOOL_MAX_TOKENS

    headers = raws[-1].headers
    assert int(headers["x-curator-tokens-before"]) > SMALL_WINDOW
    assert int(headers["x-curator-tokens-after"]) < SMALL_WINDOW
    actions = dict(pair.split("=") for pair in headers["x-curator-actions"].split(","))
    assert int(actions["tool_result_truncation"]) > 0
    assert int(actions["token_budget"]) > 0
