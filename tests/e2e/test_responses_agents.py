"""The OpenAI Agents SDK on its default model provider (the Responses API) through the proxy:
a multi-turn tool loop whose history outgrows a small window, every request accepted by the
strict fake; and the same loop on shadow and off routes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import Config, Route, RouteMatch, ServerConfig, UpstreamConfig
from proxy.observability.exchange import ExchangeRecord
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests import factories as f
from tests.e2e.conftest import SMALL_MODEL, SMALL_WINDOW
from tests.e2e.test_shadow import record_of
from tests.fakes import responses_items as r
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.e2e

INSTRUCTIONS = "You are a coding agent. Read files until you can answer."
STEPS = 9
ANSWER = "The bug is in m8.py."


def modes_config(fake_origin: str) -> Config:
    chain = Chain((ToolResultTruncation(max_tokens=300, keep_recent=2), TokenBudget()))
    routes = tuple(
        Route(mode, "fake", "agent", RouteMatch(headers=(("x-e2e-mode", mode),)), mode=mode)
        for mode in ("shadow", "off")
    )
    return Config(
        source="<e2e agents>",
        server=ServerConfig(),
        upstreams={"fake": UpstreamConfig("fake", fake_origin + "/v1", read_timeout_s=30.0)},
        policies={"agent": Policy("agent", chain)},
        routes=(*routes, Route("enforce", "fake", "agent")),
        models=ModelTable.with_overrides([(SMALL_MODEL, ModelInfo(SMALL_WINDOW))]),
    )


@pytest.fixture(scope="module")
def records() -> list[ExchangeRecord]:
    return []


@pytest.fixture(scope="module")
def origin(fake_server: FakeOpenAI, records: list[ExchangeRecord]) -> Iterator[str]:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI otherwise
    app = create_app(modes_config(fake_server.origin), observers=(records.append,))
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        yield server.origin


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return f.long_text(700, path.replace("/", "_").replace(".", "_"))


async def run_agent(origin: str, fake: FakeOpenAI, mode: str | None) -> str:
    calls = [
        ToolCall("read_file", orjson.dumps({"path": f"src/m{k}.py"}).decode(), f"call_{k}")
        for k in range(STEPS)
    ]
    fake.queue(*(Behavior(tool_calls=(call,)) for call in calls), Behavior(reply=ANSWER))
    headers = {"x-e2e-mode": mode} if mode else {}
    client = AsyncOpenAI(
        base_url=origin + "/v1", api_key="sk-agents", max_retries=0, default_headers=headers
    )
    model = OpenAIResponsesModel(model=SMALL_MODEL, openai_client=client)
    agent = Agent(name="coder", instructions=INSTRUCTIONS, tools=[read_file], model=model)
    try:
        result = await Runner.run(agent, "Find the bug.", max_turns=STEPS + 2)
    finally:
        await client.close()
    return str(result.final_output)


@pytest.mark.anyio
async def test_an_agent_loop_past_the_window_is_curated_and_always_accepted(
    origin: str, fake: FakeOpenAI
) -> None:
    assert await run_agent(origin, fake, None) == ANSWER
    bodies = [r.json() for r in fake.requests]
    assert len(bodies) == STEPS + 1
    assert all(b["instructions"] == INSTRUCTIONS for b in bodies)
    last = bodies[-1]["input"]
    assert last[-1]["type"] == "function_call_output"
    assert last[-1]["output"] == f.long_text(700, "src_m8_py")  # the newest item verbatim
    assert last[0]["content"] == "Find the bug."
    outputs = {i["call_id"]: i["output"] for i in last if i.get("type") == "function_call_output"}
    whole = {f"call_{k}": f.long_text(700, f"src_m{k}_py") for k in range(STEPS)}
    cut = [cid for cid, output in outputs.items() if output != whole[cid]]
    assert cut  # older results were shortened (the same loop uncurated is refused: below)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["shadow", "off"])
async def test_shadow_and_off_send_the_agents_bytes(
    origin: str, fake: FakeOpenAI, mode: str
) -> None:
    """Past the window the strict fake refuses the uncurated history: the loop ends in a
    400, after every request went upstream exactly as the agent sent it."""
    with pytest.raises(Exception, match="context window"):
        await run_agent(origin, fake, mode)
    last = fake.requests[-1].json()
    assert len(last["input"]) == 2 * len(fake.requests) - 1


@pytest.mark.parametrize("stream", [False, True])
def test_the_record_has_its_kind_and_the_upstreams_usage(
    origin: str, fake: FakeOpenAI, records: list[ExchangeRecord], stream: bool
) -> None:
    body = {"model": "gpt-4o", "input": [r.user("Status?")], "stream": stream}
    response = httpx.post(origin + "/v1/responses", json=body, timeout=30)
    assert response.status_code == 200
    record = record_of(records, response.headers)
    assert record.protocol is not None
    assert record.protocol.name == "responses"
    usage = record.usage()
    assert usage is not None
    sent = fake.sent[-1]
    done = orjson.loads(sent) if not stream else orjson.loads(sent.split(b"data: ")[-1])
    reported = done["usage"] if not stream else done["response"]["usage"]
    assert usage.input_tokens == reported["input_tokens"]
    assert usage.output_tokens == reported["output_tokens"]
    assert usage.cached_tokens == 0
    assert record.protocol.assemble(response.content).text == "Hello from the fake upstream."
