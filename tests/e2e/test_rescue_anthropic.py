"""Real sockets: Anthropic's overflow error (`prompt is too long: N tokens > M maximum`,
400 `invalid_request_error`) on a curated Messages request is rescued before the client
sees a byte, as for chat (`on_upstream_overflow: retry`), against the strict fake."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.policy import Policy
from policies.system import SystemPreservation
from proxy.config.loader import Config, Route, RouteMatch, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.servers import ServerThread

pytestmark = pytest.mark.e2e

MODEL = "claude-rescue"
REAL_WINDOW = 20_000
"""The fake's window; the proxy, told nothing, assumes Claude's 200k."""
PASSING = "claude-rescue-pass"
"""Another model: a window stated in an overflow is kept for its model."""


def budget_policy() -> Policy:
    pins = SystemPreservation(pin_first_user=True)
    chain = Chain((pins, TokenBudget(), ToolPairCoherence()))
    return Policy("budget", chain, pins=pins.pin_spec())


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(windows={MODEL: REAL_WINDOW, PASSING: REAL_WINDOW})
    passing = dataclasses.replace(budget_policy(), name="passing", on_upstream_overflow="pass")
    with ServerThread(fake.app) as upstream:
        config = Config(
            source="<e2e>",
            server=ServerConfig(),
            upstreams={"claude": UpstreamConfig("claude", upstream.origin, kind="anthropic")},
            policies={"budget": budget_policy(), "passing": passing},
            routes=(
                Route("pass", "claude", "passing", RouteMatch(headers=(("x-e2e-route", "pass"),))),
                Route("claude", "claude", "budget"),
            ),
        )
        with ServerThread(create_app(config, watch_interval_s=None)) as proxy:
            yield fake, proxy.origin


@pytest.fixture
def fake(servers: tuple[FakeAnthropic, str]) -> FakeAnthropic:
    servers[0].reset()
    return servers[0]


def long_history(steps: int) -> list[dict[str, Any]]:
    """A tool loop of `steps` file reads, each result ~1k tokens."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for i in range(steps):
        use = {"type": "tool_use", "id": f"toolu_r{i:04d}", "name": "read", "input": {"n": i}}
        text = "".join(f"line {n} of file {i}: value = {n * i}\n" for n in range(90))
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": text}
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"file {i}"}, use]},
            {"role": "user", "content": [result]},
        ]
    return messages


TOOLS: Any = [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
]


def test_anthropics_overflow_is_rescued_before_the_client_sees_it(
    fake: FakeAnthropic, servers: tuple[FakeAnthropic, str]
) -> None:
    with anthropic.Anthropic(base_url=servers[1], api_key="sk-ant-x", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=1024,
            tools=TOOLS,
            messages=long_history(30),  # type: ignore[arg-type]
        )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-curator-rescued"] == "1"
    # The first attempt was refused in Anthropic's words; the retry, cut below it, was not.
    assert len(fake.rejected) == 1
    assert fake.rejected[0].startswith("prompt is too long: ")
    assert f"> {REAL_WINDOW} maximum" in fake.rejected[0]
    assert len(fake.requests) == 2
    assert len(fake.requests[1].body) < len(fake.requests[0].body)
    assert int(raw.headers["x-curator-tokens-after"]) < int(raw.headers["x-curator-tokens-before"])


def test_with_on_upstream_overflow_pass_the_error_reaches_the_client_as_written(
    fake: FakeAnthropic, servers: tuple[FakeAnthropic, str]
) -> None:
    with (
        anthropic.Anthropic(
            base_url=servers[1],
            api_key="sk-ant-x",
            max_retries=0,
            default_headers={"x-e2e-route": "pass"},
        ) as client,
        pytest.raises(anthropic.BadRequestError) as refused,
    ):
        client.messages.create(
            model=PASSING,
            max_tokens=1024,
            tools=TOOLS,
            messages=long_history(30),  # type: ignore[arg-type]
        )
    assert refused.value.status_code == 400
    assert "prompt is too long" in str(refused.value)
    assert len(fake.requests) == 1
