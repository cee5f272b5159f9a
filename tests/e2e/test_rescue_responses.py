"""Real sockets: the OpenAI Agents SDK (Responses API) on a model no table knows, whose
upstream counts its own way and refuses an overflow without numbers ("Your input exceeds
the context window of this model"). Each refusal is rescued at half of what was refused,
not 10% under the assumed 128k window (which cut nothing: the run failed at its first
turn past the real window)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from policies.models import ModelTable
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests import factories as f
from tests.e2e.conftest import agent_policy
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.e2e

MODEL = "house-agent-unlisted"
WINDOW = 8192
"""The upstream's real window; the proxy, knowing nothing of the model, assumes 128k."""
STEPS = 4
ANSWER = "The bug is in m3.py."


@pytest.fixture
def unlisted() -> Iterator[FakeOpenAI]:
    # Its model list states no window; a refused request's scripted reply goes to the retry.
    fake = FakeOpenAI(windows={MODEL: WINDOW}, requeue_refused=True)
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def origin(unlisted: FakeOpenAI) -> Iterator[str]:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI otherwise
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams={"fake": UpstreamConfig("fake", unlisted.origin + "/v1", read_timeout_s=30)},
        policies={"agent": agent_policy()},
        routes=(Route("default", "fake", "agent"),),
        models=ModelTable(),
    )
    app = create_app(config)
    with ServerThread(app, **{**uvicorn_options(), "log_level": "warning"}) as server:
        yield server.origin


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return f.long_text(1400, path.replace("/", "_").replace(".", "_"))  # ~3,000 tokens


@pytest.mark.anyio
async def test_an_agent_run_on_an_unlisted_model_is_rescued_past_its_window(
    origin: str, unlisted: FakeOpenAI
) -> None:
    calls = [
        ToolCall("read_file", orjson.dumps({"path": f"src/m{k}.py"}).decode(), f"call_{k}")
        for k in range(STEPS)
    ]
    unlisted.queue(*(Behavior(tool_calls=(call,)) for call in calls), Behavior(reply=ANSWER))
    client = AsyncOpenAI(base_url=origin + "/v1", api_key="sk-agents", max_retries=0)
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    agent = Agent(name="coder", instructions="Read files.", tools=[read_file], model=model)
    try:
        result = await Runner.run(agent, "Find the bug.", max_turns=STEPS + 2)
    finally:
        await client.close()
    assert result.final_output == ANSWER
    refused = [orjson.loads(s) for s in unlisted.sent if s.startswith(b'{"error"')]
    assert refused  # the history did outgrow the real window
    assert all(r["error"]["code"] == "context_length_exceeded" for r in refused)
    bodies = [r.json() for r in unlisted.requests if r.path == "/v1/responses"]
    assert len(bodies) == STEPS + 1 + len(refused)  # each refusal was retried once, accepted
    assert bodies[-1]["input"][0]["content"] == "Find the bug."
