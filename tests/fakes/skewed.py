"""A strict upstream that counts prompts differently from the proxy, as open-model servers do.

It serves one model the way vLLM does: `GET /v1/models` states its window as
`max_model_len` (unless `listed` is off), and a chat request whose prompt plus
`max_tokens` exceeds it is answered 400: `context_length_exceeded` with OpenAI's message,
or with `wording="vllm"` vLLM's current `BadRequestError` and its two messages (a prompt
over the window; a prompt that fits but not with `max_tokens`). Its count is its own, independent of
`policies/`: another encoding, a constant factor, and per-message, per-call and per-tool
overheads (a chat template's special tokens). Accepted requests report that count as
`usage.prompt_tokens`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes import openai_rules as rules


@dataclass
class SkewedUpstream:
    """The server's counting rules and what it answered; `app` is what uvicorn serves."""

    model: str
    window: int
    encoding: str = "cl100k_base"
    factor: float = 1.0
    per_message: int = 0
    per_call: int = 0
    per_tool: int = 0
    wording: str = "openai"
    """Its overflow error: "openai" or "vllm"."""
    listed: bool = True
    """Whether its model list states the window."""
    origin: str = ""
    """Where it is served (`http://127.0.0.1:PORT`), set by whoever starts the server."""
    statuses: list[int] = field(default_factory=list)
    """The status of every chat request, in order."""
    counted: list[int] = field(default_factory=list)
    """Its prompt count for every chat request, in order."""
    received: list[dict[str, Any]] = field(default_factory=list)
    """Every chat request's body, in order."""
    errors: list[str] = field(default_factory=list)
    """The message of every overflow error it answered, in order."""

    def __post_init__(self) -> None:
        self._enc = tiktoken.get_encoding(self.encoding)
        self.app = Starlette(
            routes=[
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )

    def count(self, body: dict[str, Any]) -> int:
        """Its prompt count: never the proxy's formula, whatever the settings."""
        enc = self._enc
        raw = 0
        for msg in body["messages"]:
            raw += 4 + self.per_message  # a template's role markers
            content = msg.get("content")
            if isinstance(content, str):
                raw += len(enc.encode_ordinary(content))
            elif isinstance(content, list):
                texts = (p.get("text", "") for p in content if isinstance(p, dict))
                raw += sum(len(enc.encode_ordinary(t)) for t in texts)
            for call in msg.get("tool_calls") or ():
                raw += self.per_call + len(enc.encode_ordinary(orjson.dumps(call).decode()))
            if isinstance(msg.get("tool_call_id"), str):
                raw += len(enc.encode_ordinary(msg["tool_call_id"]))
        for tool in body.get("tools") or ():
            raw += self.per_tool + len(enc.encode_ordinary(orjson.dumps(tool).decode()))
        return math.ceil(self.factor * raw) + 2

    async def _models(self, _request: Request) -> Response:
        entry: dict[str, Any] = {"id": self.model, "object": "model"}
        if self.listed:
            entry["max_model_len"] = self.window
        return Response(orjson.dumps({"object": "list", "data": [entry]}), 200, _JSON)

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.received.append(body)
        problem = rules.check_ordering(body["messages"])
        if problem is not None:
            self.statuses.append(400)
            return Response(problem, 400, _JSON)
        tokens = self.count(body)
        self.counted.append(tokens)
        reserve = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        if tokens + reserve > self.window:
            self.statuses.append(400)
            return Response(self._overflow(tokens, reserve), 400, _JSON)
        self.statuses.append(200)
        reply = {"role": "assistant", "content": "ok"}
        payload = {
            "id": "chatcmpl-skewed",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
        }
        return Response(orjson.dumps(payload), 200, _JSON)

    def _overflow(self, tokens: int, reserve: int) -> bytes:
        window = self.window
        if self.wording == "openai":
            message = rules.CONTEXT.format(window=window, tokens=tokens + reserve)
            self.errors.append(message)
            return rules.error_body(message, "messages", "context_length_exceeded")
        if tokens >= window:
            param = "input_tokens"
            message = (
                f"This model's maximum context length is {window} tokens. However, your "
                f"request has {tokens} input tokens. Please reduce the length of the input "
                "messages."
            )
        else:
            param = "max_tokens"
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {reserve}. This "
                f"model's maximum context length is {window} tokens and your request has "
                f"{tokens} input tokens ({reserve} > {window} - {tokens})."
            )
        self.errors.append(message)
        error = {"message": message, "type": "BadRequestError", "param": param, "code": 400}
        return orjson.dumps({"error": error})


_JSON = {"content-type": "application/json"}
