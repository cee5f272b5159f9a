"""What the fake OpenAI server checks and answers, written from OpenAI's observed behaviour.

Deliberately independent of `policies/`: if the curation core and this file disagreed
about OpenAI's rules, the e2e suite would catch it instead of both agreeing on a mistake.
Error texts are OpenAI's, typos included ("preceeding").
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import tiktoken

    from tests.fakes.upstream import Behavior

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
INVALID_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please "
    "contact us through our help center at help.openai.com.)"
)
TOOL_WITHOUT_CALLS = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
CONTEXT = (
    "This model's maximum context length is {window} tokens. However, your messages "
    "resulted in {tokens} tokens. Please reduce the length of the messages."
)


def error_body(message: str, param: str | None, code: str | None) -> bytes:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return orjson.dumps({"error": error})


def invalid_api_key(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """OpenAI's 401 body; like OpenAI it echoes a masked form of the key it got."""
    sent = next((v.decode("latin-1") for n, v in headers if n == b"authorization"), "")
    key = sent.removeprefix("Bearer ")
    masked = f"{key[:3]}*****{key[-4:]}" if len(key) > 8 else key
    message = (
        f"Incorrect API key provided: {masked}. You can find your API key at "
        "https://platform.openai.com/account/api-keys."
    )
    return error_body(message, None, "invalid_api_key")


def check_request(body: Any, encoding: tiktoken.Encoding, window: int) -> bytes | None:
    """OpenAI's 400 body for this chat request, or None when OpenAI would accept it."""
    if not isinstance(body, dict):
        return error_body("Invalid type for request body: expected an object.", None, None)
    if not isinstance(body.get("model"), str):
        return error_body("you must provide a model parameter", None, None)
    messages = body.get("messages")
    if not isinstance(messages, list):
        msg = "Missing required parameter: 'messages'."
        return error_body(msg, "messages", "missing_required_parameter")
    if not messages:
        msg = (
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead."
        )
        return error_body(msg, "messages", "empty_array")
    problem = check_ordering(messages)
    if problem is not None:
        return problem
    tokens = count_prompt(messages, encoding)
    if tokens > window:
        msg = CONTEXT.format(window=window, tokens=tokens)
        return error_body(msg, "messages", "context_length_exceeded")
    return None


def check_ordering(messages: Sequence[Any]) -> bytes | None:
    """Tool-call ordering exactly as OpenAI enforces it."""
    pending: list[str] = []
    block: int | None = None  # index of the assistant message whose calls are pending
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            text = f"Invalid type for 'messages[{i}]': expected an object."
            return error_body(text, f"messages[{i}]", "invalid_type")
        role = msg.get("role")
        if role not in ROLES:
            text = (
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'."
            )
            return error_body(text, f"messages[{i}].role", "invalid_value")
        if role == "tool":
            if block is None:
                return error_body(TOOL_WITHOUT_CALLS, f"messages.[{i}].role", None)
            call_id = msg.get("tool_call_id")
            if call_id not in pending:
                text = (
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message."
                )
                return error_body(text, f"messages.[{i}].tool_call_id", None)
            pending.remove(call_id)
            continue
        if pending and block is not None:
            return error_body(UNANSWERED + ", ".join(pending), f"messages.[{block}].role", None)
        block = None
        if role == "assistant":
            problem = _check_assistant(i, msg)
            if problem is not None:
                return problem
            calls = msg.get("tool_calls")
            if calls:
                pending, block = [c["id"] for c in calls], i
    if pending and block is not None:
        return error_body(UNANSWERED + ", ".join(pending), f"messages.[{block}].role", None)
    return None


def _check_assistant(i: int, msg: dict[str, Any]) -> bytes | None:
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and not calls:
        text = (
            f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with "
            "minimum length 1, but got an empty array instead."
        )
        return error_body(text, f"messages[{i}].tool_calls", "empty_array")
    no_text = msg.get("content") is None and msg.get("refusal") is None
    if no_text and not calls and not msg.get("function_call"):
        text = "Invalid value for 'content': expected a string, got null."
        return error_body(text, f"messages.[{i}].content", None)
    return None


def count_prompt(messages: Sequence[dict[str, Any]], enc: tiktoken.Encoding) -> int:
    """OpenAI cookbook counting: 3 per message, +1 per name, +3 reply priming."""
    total = 3
    for msg in messages:
        total += 3
        for key, value in msg.items():
            if key == "tool_calls" and isinstance(value, list):
                for call in value:
                    fn = call.get("function", {})
                    total += len(enc.encode_ordinary(fn.get("name", "")))
                    total += len(enc.encode_ordinary(fn.get("arguments", "")))
            elif isinstance(value, str):
                total += len(enc.encode_ordinary(value)) + (1 if key == "name" else 0)
            elif isinstance(value, list):
                texts = (p.get("text", "") for p in value if isinstance(p, dict))
                total += sum(len(enc.encode_ordinary(t)) for t in texts)
    return total


def completion(
    body: dict[str, Any], behavior: Behavior, prompt: int, enc: tiktoken.Encoding
) -> dict[str, Any]:
    """A non-streaming chat.completion answering `body` as `behavior` says."""
    message: dict[str, Any] = {"role": "assistant", "content": behavior.reply, "refusal": None}
    finish = "stop"
    produced = len(enc.encode_ordinary(behavior.reply))
    if behavior.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in behavior.tool_calls
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None}
        finish = "tool_calls"
        produced = sum(len(enc.encode_ordinary(c.arguments)) for c in behavior.tool_calls)
    return {
        "id": f"chatcmpl-fake{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": produced,
            "total_tokens": prompt + produced,
        },
        "system_fingerprint": "fp_fake",
    }


def chunks(body: dict[str, Any], done: dict[str, Any]) -> list[bytes]:
    """The SSE events streaming `done` (a completion), `[DONE]` included."""
    options = body.get("stream_options")
    usage = isinstance(options, dict) and bool(options.get("include_usage"))
    base = {k: done[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def event(choices: list[dict[str, Any]], counts: Any = None) -> bytes:
        data = {**base, "choices": choices, **({"usage": counts} if usage else {})}
        return b"data: " + orjson.dumps(data) + b"\n\n"

    def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    message = done["choices"][0]["message"]
    events = [event([choice({"role": "assistant", "content": message["content"] and ""})])]
    for k, call in enumerate(message.get("tool_calls") or ()):
        events.append(event([choice({"tool_calls": [{"index": k, **call}]})]))
    for piece in re.findall(r"\S+\s*|\s+", message["content"] or ""):
        events.append(event([choice({"content": piece})]))
    events.append(event([choice({}, done["choices"][0]["finish_reason"])]))
    if usage:
        events.append(event([], done["usage"]))
    events.append(b"data: [DONE]\n\n")
    return events
