"""Real sockets: the strict fake OpenAI server and the proxy, each under uvicorn on loopback.

Both servers start once per session and are shared; `fake` is reset before every test.
The proxy runs with the production uvicorn settings (uvloop, httptools when installed)
and the production upstream client (aiohttp). Routes are picked per test with the
`x-e2e-route` header, so one proxy covers every upstream situation:

- default: the fake, policy `agent` (a coding-agent chain); `x-curator-policy` allowed
- `keyed`: the fake with a configured upstream key (replaces the client's Authorization)
- `short`: the fake with a 2 s read timeout
- `dead`: a loopback port nobody listens on (with a configured upstream key)
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import (
    Config,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
)
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.fakes.servers import HOST, ServerThread
from tests.fakes.upstream import FakeOpenAI

SMALL_MODEL = "gpt-4o-e2e"
"""A model name the fake and the proxy both give a small window, so histories overflow."""
SMALL_WINDOW = 16_384
UPSTREAM_KEY = "sk-upstream-secret-e2e"
READ_TIMEOUT_S = 2.0
TOOL_MAX_TOKENS = 400
KEEP_RECENT = 2


def agent_policy() -> Policy:
    pins = SystemPreservation(pin_first_user=True)
    chain = Chain(
        (
            pins,
            ToolResultTruncation(max_tokens=TOOL_MAX_TOKENS, keep_recent=KEEP_RECENT),
            TokenBudget(),
            ToolPairCoherence(),
        )
    )
    return Policy("agent", chain, pins=pins.pin_spec())


def e2e_config(fake_origin: str, dead_port: int) -> Config:
    base = fake_origin + "/v1"
    upstreams = {
        "fake": UpstreamConfig("fake", base, read_timeout_s=30.0),
        "keyed": UpstreamConfig("keyed", base, api_key=UPSTREAM_KEY),
        "short": UpstreamConfig("short", base, read_timeout_s=READ_TIMEOUT_S),
        "dead": UpstreamConfig(
            "dead", f"http://{HOST}:{dead_port}/v1", api_key=UPSTREAM_KEY, connect_timeout_s=2
        ),
    }
    routes = tuple(
        Route(name, name, "agent", RouteMatch(headers=(("x-e2e-route", name),)))
        for name in ("keyed", "short", "dead")
    )
    return Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams=upstreams,
        policies={"agent": agent_policy(), "off": Policy("off", on_overflow="forward")},
        routes=(*routes, Route("default", "fake", "agent", allow_policy_header=True)),
        models=ModelTable.with_overrides([(SMALL_MODEL, ModelInfo(SMALL_WINDOW))]),
    )


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(windows={SMALL_MODEL: SMALL_WINDOW, "gpt-4o": 128_000})
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture(scope="session")
def proxy_origin(fake_server: FakeOpenAI, dead_port: int) -> Iterator[str]:
    app = create_app(e2e_config(fake_server.origin, dead_port))
    options = {**uvicorn_options(), "log_level": "warning", "timeout_graceful_shutdown": 3}
    with ServerThread(app, **options) as server:
        yield server.origin


@pytest.fixture
def openai_client(proxy_origin: str) -> Iterator[OpenAI]:
    client = OpenAI(base_url=proxy_origin + "/v1", api_key="sk-client-e2e", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def http(proxy_origin: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy_origin, timeout=30) as client:
        yield client
