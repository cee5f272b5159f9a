"""The strict fake Messages server refuses what Anthropic refuses, caches prefixes as
Anthropic does, and speaks the protocol well enough for the official SDK to read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.fakes import anthropic_rules as rules
from tests.fakes.anthropic_upstream import FakeAnthropic, Reply, ToolUse
from tests.fakes.servers import ServerThread

MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(windows={"claude-tiny": 3000})
    with ServerThread(fake.app) as server:
        yield fake, server.origin


@pytest.fixture
def fake(served: tuple[FakeAnthropic, str]) -> FakeAnthropic:
    served[0].reset()
    return served[0]


def use(i: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": "read", "input": {"path": "a.py"}}


def result(i: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": content}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64, "messages": list(messages), **extra}


def user(*content: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": list(content)
        if len(content) != 1 or not isinstance(content[0], str)
        else content[0],
    }


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


REFUSED = [
    ({"model": MODEL, "messages": [user("hi")]}, "max_tokens: Field required"),
    (
        body(user("hi"), assistant(use("a")), user("go on")),
        "`tool_use` ids were found without `tool_result` blocks immediately after: a",
    ),
    (
        body(user("hi"), assistant(use("a")), user({"type": "text", "text": "x"}, result("a"))),
        "`tool_result` blocks must come first",
    ),
    (
        body(user("hi"), assistant(use("a")), user(result("b"))),
        "unexpected `tool_use_id` found in `tool_result` blocks: b",
    ),
    (
        body(user("hi"), assistant(use("a")), user("x"), user(result("a"))),
        "`tool_result` blocks must come first",
    ),
    (
        body(
            user("hi"),
            assistant(
                {"type": "thinking", "thinking": "t", "signature": rules.sign("u")},
                {"type": "text", "text": "x"},
            ),
            user("y"),
        ),
        "Invalid `signature` in `thinking` block",
    ),
    (
        body(
            user(
                *(
                    {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
                    for _ in range(5)
                )
            )
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    (body(user({"type": "text", "text": ""})), "text content blocks must be non-empty"),
    (
        body(
            user("hi"),
            assistant({"type": "text", "text": "x"}, use("a")),
            user(result("a")),
            thinking={"type": "enabled", "budget_tokens": 1024},
        ),
        "a final `assistant` message must start with a thinking block",
    ),
    (
        {"model": "claude-tiny", "max_tokens": 5, "messages": [user("word " * 4000)]},
        "prompt is too long: ",
    ),
]


@pytest.mark.parametrize(("sent", "expected"), REFUSED)
def test_it_refuses_what_anthropic_refuses(
    fake: FakeAnthropic, served: tuple[FakeAnthropic, str], sent: dict[str, Any], expected: str
) -> None:
    response = httpx.post(served[1] + "/v1/messages", json=sent)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert expected in error["error"]["message"]
    assert fake.rejected == [error["error"]["message"]]


def test_it_accepts_a_valid_tool_loop_with_signed_thinking(
    fake: FakeAnthropic, served: tuple[FakeAnthropic, str]
) -> None:
    thinking = {"type": "thinking", "thinking": "plan", "signature": rules.sign("plan")}
    sent = body(
        user("hi"),
        assistant(thinking, use("a"), use("b")),
        user(
            result("b"),
            result("a", [{"type": "text", "text": "A"}]),
            {"type": "text", "text": "more"},
        ),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    response = httpx.post(served[1] + "/v1/messages", json=sent)
    assert response.status_code == 200, response.text
    assert fake.rejected == []


@pytest.mark.usefixtures("fake")
def test_prefix_caching_reports_writes_then_reads(served: tuple[FakeAnthropic, str]) -> None:
    system = [
        {
            "type": "text",
            "text": "rules " * 1500,
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    first = body(user("one"), system=system)
    usages = [
        httpx.post(served[1] + "/v1/messages", json=b).json()["usage"] for b in (first, first)
    ]
    assert usages[0]["cache_read_input_tokens"] == 0
    assert usages[0]["cache_creation_input_tokens"] > 1024
    assert (
        usages[0]["cache_creation"]["ephemeral_1h_input_tokens"]
        == usages[0]["cache_creation_input_tokens"]
    )
    assert usages[1]["cache_read_input_tokens"] == usages[0]["cache_creation_input_tokens"]
    assert usages[1]["cache_creation_input_tokens"] == 0


def test_the_sdk_reads_its_messages_and_streams(
    fake: FakeAnthropic, served: tuple[FakeAnthropic, str]
) -> None:
    client = anthropic.Anthropic(base_url=served[1], api_key="sk-ant-test", max_retries=0)
    fake.queue(
        Reply(text="let me look", tool_uses=(ToolUse("read", {"path": "a.py"}),), thinking="hmm")
    )
    message = client.messages.create(
        model=MODEL,
        max_tokens=2048,
        messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    fake.queue(Reply(text="streamed text", thinking="deep"))
    with client.messages.stream(
        model=MODEL,
        max_tokens=2048,
        messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].signature == rules.sign("deep")  # type: ignore[union-attr]
    assert (
        client.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        ).input_tokens
        > 0
    )
