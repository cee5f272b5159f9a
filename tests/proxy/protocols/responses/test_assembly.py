"""A relayed Responses API response reassembled for the audit log, whole or streamed."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.responses.assembly import assemble

USAGE = {"input_tokens": 120, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 0}}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "read_file",
    "arguments": '{"path": "a.py"}',
}
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
MESSAGE = {
    "type": "message",
    "role": "assistant",
    "content": [
        {"type": "output_text", "text": "Reading ", "annotations": []},
        {"type": "output_text", "text": "it."},
    ],
}


def response(**extra: Any) -> dict[str, Any]:
    body = {"object": "response", "status": "completed", "output": [MESSAGE, CALL, SEARCH]}
    return {**body, "usage": USAGE, **extra}


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


def test_a_whole_response_gives_text_calls_usage_and_status() -> None:
    found = assemble(orjson.dumps(response()))
    assert found.text == "Reading it."
    assert found.tool_calls[0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }
    assert found.tool_calls[1]["type"] == "web_search_call"  # other tools keep their fields
    assert found.usage == USAGE
    assert found.finish_reason == "completed"


def test_an_incomplete_response_says_why() -> None:
    body = response(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    assert assemble(orjson.dumps(body)).finish_reason == "max_output_tokens"


def test_a_stream_is_read_from_its_completed_event() -> None:
    data = sse(
        {"type": "response.created", "response": {"status": "in_progress", "output": []}},
        {"type": "response.output_text.delta", "delta": "Read"},
        {"type": "response.completed", "response": response()},
    )
    found = assemble(data)
    assert (found.text, found.usage) == ("Reading it.", USAGE)


def test_a_stream_cut_short_keeps_what_it_had() -> None:
    data = sse(
        {"type": "response.output_text.delta", "delta": "Read"},
        {"type": "response.output_text.delta", "delta": "ing"},
        {"type": "response.output_item.done", "item": CALL},
    )
    found = assemble(data + b"data: {broken\n\n")
    assert found.text == "Reading"
    assert [c["id"] for c in found.tool_calls] == ["call_1"]
    assert found.usage is None


def test_a_body_that_is_not_a_response_is_kept_as_text() -> None:
    assert assemble(b"upstream exploded").text == "upstream exploded"
    assert assemble(b"[1, 2]").text == "[1, 2]"
