"""Requests OpenAI accepts must stay accepted through the proxy: repeated tool_call ids,
and input that curation would empty (official openai SDK, strict fake, real sockets)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from openai import OpenAI

from tests.fakes import openai_rules
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

REPLY = "Both runs passed."


def _call(name: str) -> dict[str, Any]:
    return {"id": "d", "type": "function", "function": {"name": name, "arguments": "{}"}}


REPEATED_IDS: list[dict[str, Any]] = [
    {"role": "user", "content": "Run the tests twice."},
    {"role": "assistant", "content": None, "tool_calls": [_call("run_tests"), _call("shell")]},
    {"role": "tool", "tool_call_id": "d", "content": "first run: ok"},
    {"role": "tool", "tool_call_id": "d", "content": "second run: ok"},
]


def test_the_strict_upstream_accepts_repeated_ids_answered_once_each() -> None:
    one_result = REPEATED_IDS[:3]
    three_results = [*REPEATED_IDS, {"role": "tool", "tool_call_id": "d", "content": "x"}]
    assert openai_rules.check_ordering(REPEATED_IDS) is None
    unanswered = openai_rules.check_ordering(one_result)
    assert unanswered is not None
    assert orjson.loads(unanswered)["error"]["message"] == openai_rules.UNANSWERED + "d"
    assert openai_rules.check_ordering(three_results) is not None


def test_repeated_tool_call_ids_are_accepted_end_to_end(
    openai_client: OpenAI, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply=REPLY))
    completion = openai_client.chat.completions.create(
        model="gpt-4o",
        messages=REPEATED_IDS,  # type: ignore[arg-type]
    )
    assert completion.choices[0].message.content == REPLY
    assert fake.last.json()["messages"] == REPEATED_IDS


def test_a_request_curation_would_empty_is_forwarded_as_sent(
    openai_client: OpenAI, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply=REPLY))
    messages = [{"role": "function", "content": None, "name": None}]
    raw = openai_client.chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=messages,  # type: ignore[arg-type]
    )
    assert raw.headers["x-curator-skipped"] == "curated_empty"
    assert raw.parse().choices[0].message.content == REPLY
    assert fake.last.body == raw.http_request.content
