"""protocols/chat/assembly.py: a relayed chat completion, streamed or not, as one message
(fed through the audit's BodyCapture as the relay feeds it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.observability.audit.capture import BodyCapture
from proxy.protocols.base import Assembled
from proxy.protocols.chat.assembly import assemble, assemble_json, assemble_sse


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": choices, **extra}
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


STREAM = b"".join(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Caf\u00e9 "}),
        chunk({"content": "\U0001f642 done."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ls", "arguments": "{}"},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a.txt"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}),
        b"data: [DONE]\n\n",
        chunk({"content": "after DONE is ignored"}),
    ]
)

EXPECTED = Assembled(
    text="Caf\u00e9 \U0001f642 done.",
    tool_calls=[
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ],
    usage={"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17},
    finish_reason="tool_calls",
)


def test_stream_is_reassembled() -> None:
    acc = BodyCapture()
    acc.feed(STREAM)
    assert assemble(acc.data()) == EXPECTED
    text, tool_calls, usage, finish = assemble(acc.data())
    assert (text, tool_calls, usage, finish) == tuple(EXPECTED)


def test_every_split_point_gives_the_same_result() -> None:
    # Covers boundaries mid-line, mid-JSON and inside multi-byte UTF-8 characters.
    for cut in range(len(STREAM) + 1):
        acc = BodyCapture()
        acc.feed(STREAM[:cut])
        acc.feed(STREAM[cut:])
        assert assemble(acc.data()) == EXPECTED, cut


def test_byte_by_byte_feeding() -> None:
    acc = BodyCapture()
    for i in range(len(STREAM)):
        acc.feed(STREAM[i : i + 1])
    assert acc.size == len(STREAM)
    assert assemble(acc.data()) == EXPECTED


def test_crlf_comments_multiline_data_and_no_space_after_colon() -> None:
    first = json.dumps({"choices": [{"index": 0, "delta": {"content": "a"}}]})
    second = {"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]}
    lines = json.dumps(second, indent=1).split("\n")
    data = (
        b": keep-alive\r\n\r\n"
        + f"data:{first}\r\n\r\n".encode()
        + b"".join(f"data: {line}\r\n".encode() for line in lines)
        + b"\r\nevent: ping\r\ndata: not json\r\n\r\n"
    )
    assert assemble_sse(data) == Assembled("ab", [], None, "stop")


def test_stream_cut_before_done_keeps_what_arrived() -> None:
    cut = STREAM.index(b"data: [DONE]") - 30
    result = assemble_sse(STREAM[:cut])
    assert result.text == EXPECTED.text
    assert result.usage is None


def test_cap_marks_truncated_and_stays_parseable() -> None:
    acc = BodyCapture(max_bytes=200)
    for i in range(0, len(STREAM), 64):
        acc.feed(STREAM[i : i + 64])
    assert acc.truncated
    assert acc.size == 200
    assert acc.data() == STREAM[:200]
    assert EXPECTED.text.startswith(assemble(acc.data()).text)


def test_under_the_cap_is_not_truncated() -> None:
    acc = BodyCapture(max_bytes=len(STREAM))
    acc.feed(STREAM)
    acc.feed(b"")
    assert not acc.truncated


def test_legacy_function_call_stream() -> None:
    data = chunk({"function_call": {"name": "get", "arguments": '{"a"'}}) + chunk(
        {"function_call": {"arguments": ": 1}"}}, finish="function_call"
    )
    result = assemble_sse(data)
    assert result.tool_calls == [
        {"id": None, "type": "function_call", "function": {"name": "get", "arguments": '{"a": 1}'}}
    ]
    assert result.finish_reason == "function_call"


def test_only_choice_zero_is_assembled() -> None:
    other = {"choices": [{"index": 1, "delta": {"content": "other"}}]}
    data = b"data: " + json.dumps(other).encode() + b"\n\n" + chunk({"content": "mine"})
    assert assemble_sse(data).text == "mine"


COMPLETION = {
    "id": "c2",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}],
                "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"total_tokens": 3},
}


def test_non_streamed_body() -> None:
    body = json.dumps(COMPLETION).encode()
    expected = Assembled(
        "Hello there",
        [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        {"total_tokens": 3},
        "stop",
    )
    assert assemble_json(body) == expected
    assert assemble(b"  \n" + body) == expected
    acc = BodyCapture()
    acc.feed(body[:7])
    acc.feed(body[7:])
    assert assemble(acc.data()) == expected


@pytest.mark.parametrize("body", [b"upstream exploded", b"[1, 2]", b"{not json"])
def test_bodies_that_are_not_completions_are_kept_as_text(body: bytes) -> None:
    assert assemble(body).text == body.decode()


def test_empty_response() -> None:
    assert assemble(BodyCapture().data()) == Assembled("", [], None, None)
