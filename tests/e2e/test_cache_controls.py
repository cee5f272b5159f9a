"""The client's cache controls through a real proxy, curated: `prompt_cache_key` and its
neighbours go byte for byte, `cache_control` stays on the chat part it was set on, and
Anthropic's cache diagnostics (request field, beta header, response object) pass as sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from policies.chain import Chain
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.serving.app import create_app
from tests import factories as f
from tests.e2e.conftest import SMALL_MODEL
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
LONG = f.long_text(2500, "row")
MARK = {"type": "ephemeral", "ttl": "1h"}
# Odd bytes a decode-and-encode would change: an escape, an exponent, spacing.
HEAD = (
    b'{"prompt_cache_key" : "caf\\u00e9-tenant-7", "prompt_cache_retention": "24h",\n'
    b' "safety_identifier": "u\\/42", "user": "bob", "temperature": 1E-1, "model": '
)
TAIL = b', "x_vendor": {"n": 1E2}, "max_tokens": 64 }'


def chat_history() -> list[dict[str, Any]]:
    """Two tool steps with long results; the older one marked on its last part."""
    return [
        f.user("Look at both tables."),
        f.assistant_calls(f.call("a", "read_file", {"path": "a.csv"})),
        f.tool_result("a", [f.text_part(LONG), {**f.text_part("end of a"), "cache_control": MARK}]),
        f.assistant_calls(f.call("b", "read_file", {"path": "b.csv"})),
        f.tool_result("b", LONG),
        f.assistant("Read both."),
        f.user("Compare them."),
        f.assistant_calls(f.call("c", "read_file", {"path": "c.csv"})),
        f.tool_result("c", "small"),
    ]


def test_chat_cache_fields_go_byte_for_byte_and_marks_stay(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    body = HEAD + orjson.dumps(SMALL_MODEL) + b', "messages": ' + orjson.dumps(chat_history())
    response = http.post(CHAT, content=body + TAIL)
    assert response.status_code == 200, response.text
    assert "tool_result_truncation" in response.headers["x-curator-actions"]
    sent = fake.last.body
    assert sent.startswith(HEAD)
    assert sent.endswith(TAIL)
    result = orjson.loads(sent)["messages"][2]["content"]
    assert len(result) == 1, "cut"
    assert result[0]["cache_control"] == MARK
    assert result[0]["text"].endswith("end of a")


# -- Anthropic: cache diagnostics -----------------------------------------------------
MODEL = "claude-e2e"
BETA = "cache-diagnosis-2026-04-07"


@pytest.fixture(scope="module")
def claude() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(windows={MODEL: 100_000})
    chain = Chain((ToolResultTruncation(max_tokens=300, keep_recent=1),))
    with ServerThread(fake.app) as upstream:
        config = Config(
            source="<e2e>",
            server=ServerConfig(),
            upstreams={"claude": UpstreamConfig("claude", upstream.origin, kind="anthropic")},
            policies={"cut": Policy("cut", chain)},
            routes=(Route("claude", "claude", "cut"),),
            models=ModelTable.with_overrides([(f"{MODEL}*", ModelInfo(100_000))]),
        )
        with ServerThread(create_app(config, watch_interval_s=None)) as proxy:
            yield fake, proxy.origin


def tool_loop(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for k in range(steps):
        use = {"type": "tool_use", "id": f"t{k}", "name": "read", "input": {"k": k}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": LONG}
        messages.append({"role": "user", "content": [result]})
    return messages


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_diagnostics_go_as_sent_and_come_back(
    claude: tuple[FakeAnthropic, str], stream: bool
) -> None:
    fake, origin = claude
    fake.reset()
    head = (
        b'{"model": "' + MODEL.encode() + b'", "max_tokens": 64, "temperature": 1E-1,\n'
        b' "diagnostics": {"previous_message_id" : "msg_\\u0030001"}, "messages": '
    )
    tail = b', "metadata": {"user_id": "caf\\u00e9"}, "stream": ' + (
        b"true}" if stream else b"false}"
    )
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": BETA, "x-api-key": "sk-ant-c"}
    with httpx.Client(base_url=origin, timeout=10) as client:
        response = client.post(
            "/v1/messages", content=head + orjson.dumps(tool_loop(3)) + tail, headers=headers
        )
    assert response.status_code == 200, response.text
    assert "tool_result_truncation" in response.headers["x-curator-actions"]
    sent = fake.requests[-1]
    # Was: the body was encoded again (1E-1 -> 0.1, \u00e9 -> é) around the new messages.
    assert sent.body.startswith(head)
    assert sent.body.endswith(tail)
    assert sent.header("anthropic-beta") == BETA
    assert b'"diagnostics":{"cache_miss_reason":' in response.content
