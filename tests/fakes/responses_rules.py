"""What the fake OpenAI server checks and answers on `POST /v1/responses`.

Written from the Responses API's observed behaviour, and independent of `proxy/` and
`policies/` on purpose (see `openai_rules`). It rejects, with OpenAI's messages:
- an output whose call id no earlier call has ("No tool call found for function call
  output with call_id ...");
- a call the input never answers ("No tool output found for function call ...");
- a reasoning item with no item after it ("... was provided without its required
  following item.");
- a prompt over the model's window (`context_length_exceeded`).
It answers like the API: a `response` object, or its SSE events (`response.created`,
`response.output_text.delta`, ..., `response.completed` with usage, cached tokens included).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from tests.fakes.openai_rules import error_body

if TYPE_CHECKING:
    import tiktoken

    from tests.fakes.upstream import Behavior

CALL_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
OUTPUT_TYPES = {output: call for call, output in CALL_TYPES.items()}
CONTEXT = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def check_request(body: Any, encoding: tiktoken.Encoding, window: int) -> bytes | None:
    """OpenAI's 400 body for this Responses request, or None when it would be accepted."""
    if not isinstance(body, dict):
        return error_body("Invalid type for request body: expected an object.", None, None)
    if not isinstance(body.get("model"), str):
        return error_body(
            "Missing required parameter: 'model'.", "model", "missing_required_parameter"
        )
    items = body.get("input")
    if isinstance(items, list):
        problem = check_items(items)
        if problem is not None:
            return problem
    tokens = count_prompt(body, encoding)
    if tokens > window:
        return error_body(CONTEXT, "input", "context_length_exceeded")
    return None


def check_items(items: Sequence[Any]) -> bytes | None:
    """Call/output pairing and reasoning placement, as the Responses API enforces them."""
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return error_body(
                f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]", "invalid_type"
            )
        kind = item.get("type")
        if kind in CALL_TYPES:
            calls[str(item.get("call_id"))] = i
        elif kind in OUTPUT_TYPES:
            cid = str(item.get("call_id") or item.get("id"))
            if cid not in calls:
                text = f"No tool call found for function call output with call_id {cid}."
                return error_body(text, "input", None)
            answered.add(cid)
        elif kind == "mcp_approval_response":
            if not any(
                isinstance(x, dict) and x.get("id") == item.get("approval_request_id")
                for x in items[:i]
            ):
                text = f"No approval request found with id {item.get('approval_request_id')}."
                return error_body(text, "input", None)
        elif kind == "reasoning" and not _follows_reasoning(items[i + 1 : i + 2]):
            text = (
                f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                "required following item."
            )
            return error_body(text, "input", None)
    for cid in calls:
        if cid not in answered:
            return error_body(f"No tool output found for function call {cid}.", "input", None)
    return None


def _follows_reasoning(after: Sequence[Any]) -> bool:
    """Whether `after` (the item after a reasoning item, or nothing) is what the model
    produced with it: its message, a call, another output item, never the client's turn."""
    if not after or not isinstance(after[0], dict):
        return False
    item = after[0]
    if item.get("type") in OUTPUT_TYPES or item.get("type") == "mcp_approval_response":
        return False
    return item.get("role") in (None, "assistant")


def count_prompt(body: dict[str, Any], enc: tiktoken.Encoding) -> int:
    """A prompt size close to the API's: 3 per item plus its text, JSON for structured
    values, reasoning items by their size."""
    total = 0
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        total += len(enc.encode_ordinary(instructions)) + 3
    items = body.get("input")
    if isinstance(items, str):
        return total + len(enc.encode_ordinary(items)) + 3
    for item in items if isinstance(items, list) else ():
        total += 3 + _item_tokens(item, enc)
    return total


def _item_tokens(item: Any, enc: tiktoken.Encoding) -> int:
    if not isinstance(item, dict):
        return 0
    if item.get("type") == "reasoning":  # ciphertext is not tokenized: priced by its size
        return len(orjson.dumps(item)) // 4
    texts: list[str] = []
    for key, value in item.items():
        if key in ("type", "id", "status", "role"):
            continue
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for part in value:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part is not None:
                    texts.append(orjson.dumps(part).decode())
        elif value is not None and not isinstance(value, bool):
            texts.append(orjson.dumps(value).decode())
    return sum(len(enc.encode_ordinary(t)) for t in texts)


def response(
    body: dict[str, Any], behavior: Behavior, prompt: int, enc: tiktoken.Encoding
) -> dict[str, Any]:
    """A completed `response` object answering `body` as `behavior` says."""
    stamp = time.monotonic_ns()
    output: list[dict[str, Any]] = []
    if behavior.tool_calls:
        for k, call in enumerate(behavior.tool_calls):
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_fake{stamp}_{k}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        produced = sum(len(enc.encode_ordinary(c.arguments)) for c in behavior.tool_calls)
    else:
        part = {"type": "output_text", "text": behavior.reply, "annotations": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_fake{stamp}",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
        produced = len(enc.encode_ordinary(behavior.reply))
    cached = (prompt // 1024) * 1024 // 2
    return {
        "id": f"resp_fake{stamp}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "store": body.get("store", True),
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + produced,
        },
    }


def events(done: dict[str, Any]) -> list[bytes]:
    """The SSE events streaming `done` (a completed response), as the API sends them."""
    seq = iter(range(1_000_000))
    pending = {**done, "status": "in_progress", "output": [], "usage": None}
    out = [_event("response.created", seq, response=pending)]
    out.append(_event("response.in_progress", seq, response=pending))
    for index, item in enumerate(done["output"]):
        started = {**item, "status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        out.append(_event("response.output_item.added", seq, output_index=index, item=started))
        if item["type"] == "message":
            part = item["content"][0]
            ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
            empty = {**part, "text": ""}
            out.append(_event("response.content_part.added", seq, **ids, part=empty))
            for piece in _pieces(part["text"]):
                out.append(_event("response.output_text.delta", seq, **ids, delta=piece))
            out.append(_event("response.output_text.done", seq, **ids, text=part["text"]))
            out.append(_event("response.content_part.done", seq, **ids, part=part))
        else:
            ids = {"item_id": item["id"], "output_index": index}
            args = item["arguments"]
            out.append(_event("response.function_call_arguments.delta", seq, **ids, delta=args))
            out.append(_event("response.function_call_arguments.done", seq, **ids, arguments=args))
        out.append(_event("response.output_item.done", seq, output_index=index, item=item))
    out.append(_event("response.completed", seq, response=done))
    return out


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if k < len(words) - 1 else "") for k, w in enumerate(words)]


def _event(kind: str, seq: Any, **fields: Any) -> bytes:
    data = {"type": kind, "sequence_number": next(seq), **fields}
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
