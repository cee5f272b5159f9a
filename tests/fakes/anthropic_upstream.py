"""A strict fake of Anthropic's Messages API (starlette), recording every raw request.

`POST /v1/messages` checks each body as Anthropic does (`anthropic_rules`) and answers 400
in Anthropic's shape and wording when it would refuse it (every refusal is kept in
`rejected`), counts the prompt (tiktoken's cl100k_base over each block's JSON: not the
proxy's estimator) against the model's window (`prompt is too long: N tokens > M
maximum`), caches prefixes (`anthropic_cache`) and answers a message or its SSE events
(`message_start`, `content_block_start` / `_delta` / `_stop`, `ping`, `message_delta`,
`message_stop`). Replies are scripted with `Reply`s (one per request, in order); the
default is a short text. Thinking it produces is signed, so an edited thinking block or
signature sent back is refused. `POST /v1/messages/count_tokens` and `GET /v1/models`
answer too.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes import anthropic_rules as rules
from tests.fakes.anthropic_cache import MessagesCache, prompt_tokens
from tests.fakes.upstream import Recorded

JSON = {"content-type": "application/json"}
DEFAULT_WINDOW = 200_000


@dataclass(frozen=True, slots=True)
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """What the fake answers one request with."""

    text: str = "Hello from the fake Anthropic upstream."
    tool_uses: tuple[ToolUse, ...] = ()
    thinking: str | None = None
    """With thinking enabled in the request: a signed thinking block first."""
    status: int | None = None
    body: bytes = b""


@dataclass
class FakeAnthropic:
    """The fake server's state; `app` is what uvicorn serves."""

    windows: dict[str, int] = field(default_factory=dict)
    api_key: str | None = None
    """When set, requests must carry `x-api-key: <api_key>` (else Anthropic's 401)."""
    requests: list[Recorded] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    """The message of every 400 the strict checks gave."""
    cache: MessagesCache = field(default_factory=MessagesCache)
    usages: list[dict[str, Any]] = field(default_factory=list)
    """The usage of each message answered, in order."""
    responder: Callable[[dict[str, Any]], Reply] | None = None
    """Answers a request the script has no reply for (a scripted model); else a short text."""
    _script: deque[Reply] = field(default_factory=deque)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.enc = tiktoken.get_encoding("cl100k_base")
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    def queue(self, *replies: Reply) -> None:
        self._script.extend(replies)

    def reset(self) -> None:
        self.requests.clear()
        self.rejected.clear()
        self.usages.clear()
        self._script.clear()
        self.cache.reset()

    def window(self, model: str) -> int:
        return self.windows.get(model, DEFAULT_WINDOW)

    async def _record(self, request: Request) -> tuple[bytes, Response | None]:
        raw = await request.body()
        headers = tuple(request.scope["headers"])
        self.requests.append(
            Recorded(request.method, request.url.path, request.scope["query_string"], headers, raw)
        )
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            body = rules.error_body("invalid x-api-key", "authentication_error")
            return raw, Response(body, 401, JSON)
        return raw, None

    async def _messages(self, request: Request) -> Response:
        raw, denied = await self._record(request)
        if denied is not None:
            return denied
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self.rejected.append(str(exc))
            return Response(rules.error_body(str(exc)), 400, JSON)
        reply = self._reply(body)
        if reply.status is not None:
            return Response(reply.body, reply.status, JSON)
        try:
            rules.check(body)
            counts = prompt_tokens(body, self.enc)
            total, window = sum(counts), self.window(str(body.get("model")))
            if total > window:
                raise rules.Rejected(f"prompt is too long: {total} tokens > {window} maximum")
        except rules.Rejected as exc:
            self.rejected.append(str(exc))
            return Response(rules.error_body(str(exc)), 400, JSON)
        usage = self.cache.usage(body, counts, request.headers.get("x-session-id", ""))
        message = self._message(body, reply, usage)
        self.usages.append(message["usage"])
        if body.get("stream"):
            return Response(b"".join(events(message)), 200, {"content-type": "text/event-stream"})
        return Response(orjson.dumps(message), 200, JSON)

    def _reply(self, body: dict[str, Any]) -> Reply:
        if self._script:
            return self._script.popleft()
        return self.responder(body) if self.responder is not None else Reply()

    def _message(self, body: dict[str, Any], reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        thinking = body.get("thinking")
        if (
            reply.thinking is not None
            and isinstance(thinking, dict)
            and thinking.get("type") != "disabled"
        ):
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply.thinking,
                    "signature": rules.sign(reply.thinking),
                }
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for use in reply.tool_uses:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids):06d}",
                    "name": use.name,
                    "input": use.input,
                }
            )
        output = sum(len(self.enc.encode_ordinary(orjson.dumps(b).decode())) for b in content)
        message = {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": "tool_use" if reply.tool_uses else "end_turn",
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": output},
        }
        if isinstance(body.get("diagnostics"), dict):
            message["diagnostics"] = diagnostics(body["diagnostics"], usage)
        return message

    async def _count(self, request: Request) -> Response:
        raw, denied = await self._record(request)
        if denied is not None:
            return denied
        body = orjson.loads(raw)
        total = sum(prompt_tokens(body, self.enc))
        return Response(orjson.dumps({"input_tokens": total}), 200, JSON)

    async def _models(self, request: Request) -> Response:
        _, denied = await self._record(request)
        if denied is not None:
            return denied
        data = [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5"}]
        listing = {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"],
            "last_id": data[0]["id"],
        }
        return Response(orjson.dumps(listing), 200, JSON)


def diagnostics(asked: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """Cache diagnostics (beta `cache-diagnosis-2026-04-07`), roughly: no reason on a first
    turn or when nothing past the read was new; else `messages_changed` and the tokens
    after the point the cache stopped matching."""
    missed = usage["input_tokens"] + usage["cache_creation_input_tokens"]
    if asked.get("previous_message_id") is None or not usage["cache_creation_input_tokens"]:
        return {"cache_miss_reason": None}
    return {"cache_miss_reason": {"type": "messages_changed", "cache_missed_input_tokens": missed}}


def events(message: dict[str, Any]) -> list[bytes]:
    """The message as Anthropic streams it, event for event."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    out = [_event("message_start", {"type": "message_start", "message": start})]
    out.append(_event("ping", {"type": "ping"}))
    for i, block in enumerate(message["content"]):
        out.extend(_block_events(i, block))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    out.append(_event("message_stop", {"type": "message_stop"}))
    return out


def _block_events(i: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    if kind == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
    elif kind == "thinking":
        empty = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": part} for part in _halves(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        empty = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": part}
            for part in _halves(orjson.dumps(block["input"]).decode())
        ]
    out = [
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": empty},
        )
    ]
    out += [
        _event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
        for d in deltas
    ]
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": i}))
    return out


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [p for p in (text[:half], text[half:]) if p]


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
