"""Real sockets: overflow rescues against a vLLM-like upstream that counts differently from
the proxy and answers an overflow with vLLM's current messages (openai SDK)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI

from policies.models import ModelInfo, ModelTable
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests.e2e.conftest import agent_policy
from tests.e2e.test_rescue import long_history
from tests.e2e.test_upstream_counts import TOOLS
from tests.fakes.servers import ServerThread
from tests.fakes.skewed import SkewedUpstream

pytestmark = pytest.mark.e2e

MODEL = "house-coder-vllm"
WINDOW = 8192


def serve(fake: SkewedUpstream, models: ModelTable) -> ServerThread:
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams={"vllm": UpstreamConfig("vllm", fake.origin + "/v1")},
        policies={"agent": agent_policy()},
        routes=(Route("default", "vllm", "agent"),),
        models=models,
    )
    return ServerThread(create_app(config), **{**uvicorn_options(), "log_level": "warning"})


@pytest.fixture
def vllm() -> Iterator[SkewedUpstream]:
    # Counts a quarter more than we do: a curated request to the known window overflows.
    fake = SkewedUpstream(MODEL, WINDOW, factor=1.25, per_message=3, wording="vllm")
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def known_window(vllm: SkewedUpstream) -> Iterator[str]:
    with serve(vllm, ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW))])) as server:
        yield server.origin


@pytest.mark.parametrize(
    ("max_tokens", "wording"),
    [(512, "your request has"), (4096, "'max_tokens' or 'max_completion_tokens' is too large")],
)
def test_vllms_overflow_messages_are_read_like_openais(
    known_window: str, vllm: SkewedUpstream, max_tokens: int, wording: str
) -> None:
    client = OpenAI(base_url=known_window + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=long_history(40),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=max_tokens,
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-curator-rescued"] == "1"
    assert vllm.statuses == [400, 200]
    (error,) = vllm.errors
    assert error.startswith(wording) or f"However, {wording}" in error
    # The count it stated taught the calibration: the next long request fits at once.
    client.chat.completions.create(
        model=MODEL,
        messages=long_history(45),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=max_tokens,
    )
    assert vllm.statuses == [400, 200, 200]


@pytest.fixture
def unlisted() -> Iterator[SkewedUpstream]:
    # A model no table knows, whose window its model list does not state: the proxy
    # assumes 128k until an overflow says otherwise.
    fake = SkewedUpstream(MODEL, WINDOW, factor=1.05, per_message=3, wording="vllm", listed=False)
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def assumed_window(unlisted: SkewedUpstream) -> Iterator[str]:
    with serve(unlisted, ModelTable()) as server:
        yield server.origin


def test_a_window_an_overflow_stated_is_kept_for_the_model(
    assumed_window: str, unlisted: SkewedUpstream
) -> None:
    client = OpenAI(base_url=assumed_window + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=long_history(40),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        max_tokens=512,
    )
    assert (raw.headers["x-curator-rescued"], raw.headers["x-curator-window"]) == ("1", "assumed")
    assert unlisted.statuses == [400, 200]
    for turns in (45, 50):  # curated to the stated window from the start
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=long_history(turns),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            max_tokens=512,
        )
        assert "x-curator-rescued" not in raw.headers
        assert "x-curator-window" not in raw.headers
    assert unlisted.statuses == [400, 200, 200, 200]
    assert max(unlisted.counted[1:]) > 0.8 * (WINDOW - 512)  # the stated window was the limit
