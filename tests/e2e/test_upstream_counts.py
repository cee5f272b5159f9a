"""Real sockets: an upstream that counts differently from us and states its own window.

The skewed fake (`tests.fakes.skewed`) serves a model no table knows, with an 8k window in
its model list, and counts prompts with another encoding, a factor and per-message,
per-call and per-tool overheads. A long agent run through the proxy (openai SDK) must
never see a 400, and the calibration must converge.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.config.metrics import MetricsConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.e2e.conftest import agent_policy
from tests.fakes.servers import ServerThread
from tests.fakes.skewed import SkewedUpstream

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("window_discovery")]

MODEL = "house-coder-e2e"
WINDOW = 8192
TURNS = 60
DISCOVERY_WAIT_S = 10.0
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the repository",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "relative path"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read_file", "list_dir", "grep", "run_tests", "write_file")
]


def file_text(i: int) -> str:
    """A tool result of a few hundred tokens, different for every turn."""
    lines = [
        f"def handler_{i}_{k}(request, retries={k % 4}):\n"
        f"    value = compute({i * 31 + k}, key='m{i}', flags=[{k}, {i % 7}])\n"
        f"    return value or fallback_{k}(request)  # step {i}.{k}\n"
        for k in range(8 + i % 9)
    ]
    return "".join(lines)


SKEWS: dict[str, dict[str, Any]] = {
    "factor": {"factor": 1.2},
    "overheads": {"per_message": 12, "per_call": 10, "per_tool": 40},
    # The fake counts with cl100k_base, the proxy a model no table knows with o200k_base:
    # every variant differs by encoding; this one by nothing else.
    "encoding": {"encoding": "cl100k_base"},
    "all": {"factor": 1.12, "per_message": 5, "per_call": 7, "per_tool": 25},
}


@pytest.fixture
def skewed(request: pytest.FixtureRequest) -> Iterator[SkewedUpstream]:
    fake = SkewedUpstream(MODEL, WINDOW, **SKEWS[getattr(request, "param", "all")])
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def proxy(skewed: SkewedUpstream, request: pytest.FixtureRequest) -> Iterator[str]:
    base = skewed.origin + "/v1"
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        metrics=MetricsConfig(enabled=getattr(request, "param", "metrics") == "metrics"),
        upstreams={"skewed": UpstreamConfig("skewed", base)},
        policies={"agent": agent_policy()},
        routes=(Route("default", "skewed", "agent"),),
    )
    options = {**uvicorn_options(), "log_level": "warning"}
    with ServerThread(create_app(config), **options) as server:
        yield server.origin


def wait_for_window(client: OpenAI) -> None:
    """Discovery runs in the background: wait (bounded) until the proxy knows the window."""
    deadline = time.monotonic() + DISCOVERY_WAIT_S
    while time.monotonic() < deadline:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "ping"}], max_tokens=8
        )
        if raw.headers.get("x-curator-window") is None:
            return
        time.sleep(0.05)
    pytest.fail("the proxy never read the upstream's model list")


@pytest.mark.parametrize(
    ("skewed", "proxy"),
    [*((skew, "metrics") for skew in sorted(SKEWS)), ("all", "no_metrics")],
    indirect=True,
)
def test_a_long_agent_run_never_overflows_and_calibration_converges(
    proxy: str, skewed: SkewedUpstream
) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-e2e", max_retries=0)
    wait_for_window(client)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "Find and fix the failing handler."},
    ]
    for i in range(TURNS):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/m{i}.py"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": file_text(i)})
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=messages,
            tools=TOOLS,
            max_tokens=512,  # type: ignore[arg-type]
        )
        assert raw.http_response.status_code == 200
    assert set(skewed.statuses) == {200}
    assert max(skewed.counted) > 0.8 * (WINDOW - 512)  # the budget really was the limit

    scrape = httpx.get(proxy + "/metrics")
    if scrape.status_code == 404:
        return  # metrics off: the calibration learned all the same (no 400 above)
    metrics = scrape.text
    ratio = _value(metrics, f'curator_calibration_ratio{{model="{MODEL}",upstream="skewed"}}')
    assert 0.5 < ratio < 2.0
    within = _bucket(metrics, "0.02") - _bucket(metrics, "-0.02")
    total = _value(metrics, 'curator_calibration_error_ratio_count{upstream="skewed"}')
    assert total >= TURNS
    assert within >= total / 2, "median |error| must be <= 2%"


def test_an_unknown_model_is_said_aloud(proxy: str) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-e2e", max_retries=0)
    wait_for_window(client)
    raw = client.chat.completions.with_raw_response.create(
        model="nobody-knows-me", messages=[{"role": "user", "content": "hi"}], max_tokens=8
    )
    assert raw.headers.get("x-curator-window") == "assumed"
    metrics = httpx.get(proxy + "/metrics").text
    assert _value(metrics, 'curator_window_assumed_total{upstream="skewed"}') >= 1


def _value(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in the exposition")


def _bucket(text: str, le: str) -> float:
    name = r"^curator_calibration_error_ratio_bucket"
    pattern = re.compile(name + r'\{le="' + re.escape(le) + r'",upstream="skewed"\} (\S+)$', re.M)
    found = pattern.search(text)
    assert found is not None, le
    return float(found.group(1))
