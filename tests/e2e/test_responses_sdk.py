"""The Responses API through the proxy on real sockets: the official openai SDK (sync, async,
streaming) and a tool loop with reasoning items whose history outgrows a small window, every
request checked by the strict fake (`tests.fakes.responses_rules`)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from openai import AsyncOpenAI, OpenAI

from tests import factories as f
from tests.e2e.conftest import SMALL_MODEL, SMALL_WINDOW
from tests.fakes import responses_items as r
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.e2e

REPLY = "The build is green again."
INSTRUCTIONS = "You are a careful coding agent. Never guess file contents."
RESPONSES = "/v1/responses"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_sync_create(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    raw = openai_client.responses.with_raw_response.create(
        model="gpt-4o", instructions=INSTRUCTIONS, input=[r.user("Is the build green?")]
    )
    response = raw.parse()
    assert response.output_text == REPLY
    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 0
    sent = fake.last.json()
    assert sent["input"] == [r.user("Is the build green?")]
    assert sent["instructions"] == INSTRUCTIONS
    assert int(raw.headers["x-curator-tokens-before"]) > 0
    assert raw.headers["x-curator-route"] == "default"
    assert "x-curator-skipped" not in raw.headers


@pytest.mark.anyio
async def test_async_create(proxy_origin: str, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    async with AsyncOpenAI(base_url=proxy_origin + "/v1", api_key="sk-a", max_retries=0) as client:
        response = await client.responses.create(model="gpt-4o", input=[r.user("Status?")])
    assert response.output_text == REPLY
    assert response.usage is not None
    assert response.usage.input_tokens > 0


def test_streaming_is_relayed_event_for_event(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    kinds: list[str] = []
    text: list[str] = []
    with openai_client.responses.stream(model="gpt-4o", input=[r.user("Status?")]) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text.append(event.delta)
        final = stream.get_final_response()
    assert "".join(text) == REPLY
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert final.usage is not None
    assert final.usage.input_tokens > 0


def test_create_with_stream_true(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY))
    events = list(openai_client.responses.create(model="gpt-4o", input=[r.user("Hi")], stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == REPLY


def test_server_side_state_goes_as_sent(proxy_origin: str, fake: FakeOpenAI) -> None:
    body = {"model": "gpt-4o", "previous_response_id": "resp_1", "input": [r.user("And now?")]}
    raw = orjson.dumps(body).replace(b",", b", ")  # spacing no re-encoding would produce
    response = httpx.post(proxy_origin + RESPONSES, content=raw, timeout=30)
    assert response.status_code == 200
    assert fake.last.body == raw
    assert response.headers["x-curator-skipped"] == "server_state"


def test_a_string_input_goes_byte_for_byte(proxy_origin: str, fake: FakeOpenAI) -> None:
    raw = b'{"model": "gpt-4o",  "input": "Tell me a joke."}'
    response = httpx.post(proxy_origin + RESPONSES, content=raw, timeout=30)
    assert response.status_code == 200
    assert fake.last.body == raw
    assert response.headers["x-curator-skipped"] == "string_input"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/responses/resp_1"),
        ("DELETE", "/v1/responses/resp_1"),
        ("POST", "/v1/responses/resp_1/cancel"),
        ("GET", "/v1/responses/resp_1/input_items"),
        ("POST", "/v1/responses/compact"),
    ],
)
def test_other_responses_paths_are_relayed(
    proxy_origin: str, fake: FakeOpenAI, method: str, path: str
) -> None:
    body = b'{"model": "gpt-4o", "input": [{"role": "user", "content": "x"}]}'
    content = body if method == "POST" else None
    response = httpx.request(method, proxy_origin + path, content=content, timeout=30)
    assert response.status_code == 404  # what the fake answers: the proxy relayed it
    assert fake.last.path == path
    assert fake.last.method == method
    assert "x-curator-tokens-before" not in response.headers


def test_a_tool_loop_outgrowing_the_window_is_curated_and_always_accepted(
    openai_client: OpenAI, fake: FakeOpenAI
) -> None:
    """An agent with reasoning items and big tool outputs, resending its history each turn
    (`store: false`), well past the 16k window: every request passes the strict fake."""
    items: list[dict[str, Any]] = [r.developer("Run tools, then answer."), r.user("Fix the test.")]
    curated = 0
    for turn in range(14):
        call = ToolCall(
            "read_file", orjson.dumps({"path": f"src/m{turn}.py"}).decode(), f"call_{turn}"
        )
        fake.queue(Behavior(tool_calls=(call,)))
        raw = openai_client.responses.with_raw_response.create(
            model=SMALL_MODEL,
            instructions=INSTRUCTIONS,
            input=items,  # type: ignore[arg-type]  # plain dicts, as agents send them
            store=False,
            max_output_tokens=1024,
        )
        assert raw.http_response.status_code == 200, fake.sent[-1]
        sent = fake.last.json()
        assert sent["instructions"] == INSTRUCTIONS
        assert sent["input"][-1] == items[-1], (
            turn,
            [(k, v) for k, v in raw.headers.items() if "curator" in k],
        )
        assert sent["store"] is False
        assert sent["max_output_tokens"] == 1024
        assert sent["max_output_tokens"] == 1024
        before, after = (
            int(raw.headers["x-curator-tokens-before"]),
            int(raw.headers["x-curator-tokens-after"]),
        )
        curated += after < before
        if before > SMALL_WINDOW:
            assert after < SMALL_WINDOW
        output = [item.model_dump(exclude_none=True) for item in raw.parse().output]
        items += [r.reasoning(turn, 1500), *output]
        items.append(r.function_output(call.id, f.long_text(700, f"line{turn}")))
    assert curated >= 3
    assert any(i.get("type") == "reasoning" for i in fake.last.json()["input"])
