"""Real sockets: on a 4k window, an over-budget history whose oldest unit is a block of
parallel reads, each short, is cut into, not dropped whole (which left the prompt below
half of its budget), against an upstream that counts differently (openai SDK)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from policies.models import ModelInfo, ModelTable
from policies.policy import SAFETY_MARGIN
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from proxy.serving.server import uvicorn_options
from tests import factories as f
from tests.e2e.conftest import agent_policy
from tests.fakes.servers import ServerThread
from tests.fakes.skewed import SkewedUpstream

pytestmark = pytest.mark.e2e

MODEL = "house-small-e2e"
WINDOW = 4096
MAX_TOKENS = 256
BUDGET = WINDOW - MAX_TOKENS - math.ceil(WINDOW * SAFETY_MARGIN)
READS = 5


@pytest.fixture
def skewed() -> Iterator[SkewedUpstream]:
    fake = SkewedUpstream(MODEL, WINDOW, per_message=2)
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture
def proxy(skewed: SkewedUpstream) -> Iterator[str]:
    config = Config(
        source="<e2e>",
        server=ServerConfig(),
        upstreams={"skewed": UpstreamConfig("skewed", skewed.origin + "/v1")},
        policies={"agent": agent_policy()},
        routes=(Route("default", "skewed", "agent"),),
        models=ModelTable.with_overrides([(MODEL, ModelInfo(WINDOW))]),
    )
    options = {**uvicorn_options(), "log_level": "warning"}
    with ServerThread(create_app(config), **options) as server:
        yield server.origin


def history() -> list[dict[str, Any]]:
    """The task, five parallel reads of ~390 tokens each, then four long chat turns."""
    ids = [f"read_{k}" for k in range(READS)]
    calls = [f.call(i, "read_file", {"path": f"src/m{k}.py"}) for k, i in enumerate(ids)]
    return [
        f.system("You are a coding agent."),
        f.user("Fix the bug in src/."),
        f.assistant_calls(*calls),
        *(f.tool_result(i, f.long_text(160, f"r{k}")) for k, i in enumerate(ids)),
        *(
            message(f"{turn}: " + f.long_text(230, f"t{turn}"))
            for turn, message in enumerate((f.assistant, f.user, f.assistant, f.user))
        ),
    ]


def test_a_4k_window_is_filled_not_starved(proxy: str, skewed: SkewedUpstream) -> None:
    client = OpenAI(base_url=proxy + "/v1", api_key="sk-e2e", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=history(),  # type: ignore[arg-type]
        max_tokens=MAX_TOKENS,
    )
    assert raw.http_response.status_code == 200
    before, after = (int(raw.headers[f"x-curator-tokens-{k}"]) for k in ("before", "after"))
    assert before > BUDGET >= after >= 0.85 * BUDGET
    sent = skewed.received[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == [
        f"read_{k}" for k in range(READS)
    ]
    assert sent[1] == history()[1]  # the pinned task
