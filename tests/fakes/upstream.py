"""A strict fake OpenAI server (starlette) that records every raw request it gets.

Strict on purpose, and independent of `policies/`: it checks tool-call ordering the way
OpenAI does and answers 400 with OpenAI's own error bodies, and counts prompt tokens with
tiktoken directly against a per-model window. A curated request it accepts is one OpenAI
would accept.

Tests script it with `Behavior`s (one per request, in order; the default when none is
queued): stall before answering, trickle or pause a stream, hold a stream until a test
sets an event, drop the connection mid-stream, gzip, or answer any status and body.
The server runs in another thread, so everything tests wait on is a `threading.Event`.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from tests.fakes import openai_rules as rules
from tests.fakes import responses_rules
from tests.fakes.caching import PromptCache
from tests.fakes.realtime import realtime_endpoint

JSON = (b"content-type", b"application/json")


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request exactly as it arrived."""

    method: str
    path: str
    query: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        key = name.lower().encode()
        return next((v.decode("latin-1") for n, v in self.headers if n == key), None)

    def header_names(self) -> set[str]:
        return {n.decode("latin-1") for n, _ in self.headers}

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str
    id: str


@dataclass(frozen=True, slots=True)
class Behavior:
    """How the fake answers one request."""

    reply: str = "Hello from the fake upstream."
    tool_calls: tuple[ToolCall, ...] = ()
    status: int | None = None
    """Answer this status with `body` instead of a completion (errors, 5xx)."""
    body: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """Extra response headers."""
    stall_s: float = 0.0
    """Wait this long before the response headers."""
    chunk_delay_s: float = 0.0
    """Stream: pause between chunks."""
    pause_after: int | None = None
    pause_s: float = 0.0
    """Stream: after chunk `pause_after`, pause `pause_s` once."""
    release: threading.Event | None = None
    """Stream: after the first chunk, hold the rest until this is set."""
    abort_after: int | None = None
    """Stream: drop the connection after this many chunks. Non-stream: after this many
    body bytes (the Content-Length promised the whole body)."""
    gzip: bool = False
    """Non-stream: gzip the body and say so in Content-Encoding."""
    listing: bool = False
    """For a `GET .../models`. Only such a reply answers one, and it answers nothing else:
    a proxy lists the models in the background as it starts, and that request must not
    take the reply a test scripted for its own (seen: a stream meant to be held past
    SIGTERM's grace got the plain reply instead)."""


@dataclass
class FakeOpenAI:
    """The fake server's state and knobs; `app` is what uvicorn serves."""

    windows: Mapping[str, int] = field(default_factory=dict)
    default_window: int = 128_000
    api_key: str | None = None
    """When set, requests must carry `Authorization: Bearer <api_key>` (else OpenAI's 401)."""
    origin: str = ""
    """Where it is served (`http://127.0.0.1:PORT`), set by whoever starts the server."""
    requests: list[Recorded] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    """Each chat response body as sent (a whole stream joined), for byte comparisons."""
    disconnected: threading.Event = field(default_factory=threading.Event)
    """Set when a client left before a response finished."""
    cache: PromptCache | None = None
    """When set, chat usage reports `prompt_tokens_details.cached_tokens` from it."""
    ws_closed: list[int] = field(default_factory=list)
    """The close code of each WebSocket session a client ended."""
    requeue_refused: bool = False
    """A Responses request refused as invalid or too long leaves its scripted reply to the
    next request (the proxy's retry of it), instead of using it up."""
    _script: deque[Behavior] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.app = _Recorder(self, self._starlette())

    def queue(self, *behaviors: Behavior) -> None:
        self._script.extend(behaviors)

    def queue_first(self, behavior: Behavior) -> None:
        self._script.appendleft(behavior)

    def reset(self) -> None:
        self.requests.clear()
        self.sent.clear()
        self._script.clear()
        self.disconnected.clear()
        self.ws_closed.clear()

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    def next_behavior(self, listing: bool = False) -> Behavior:
        """The next scripted reply, when it is for this kind of request (`listing`)."""
        if self._script and self._script[0].listing == listing:
            return self._script.popleft()
        return Behavior()

    def _starlette(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", _Chat(self), methods=["POST"]),
                Route("/v1/responses", _Responses(self), methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                Route("/v1/{rest:path}", _not_found, methods=["GET", "POST", "DELETE", "PUT"]),
                WebSocketRoute(
                    "/v1/{rest:path}", realtime_endpoint(self._handshake, self.ws_closed)
                ),
            ]
        )

    async def _models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in sorted(self.windows)]
        return Response(orjson.dumps({"object": "list", "data": data}), 200, _headers(request))

    async def _embeddings(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        item = {"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 0.125]}
        payload = {"object": "list", "data": [item], "model": body.get("model")}
        payload["usage"] = {"prompt_tokens": 3, "total_tokens": 3}
        return Response(orjson.dumps(payload), 200, _headers(request))

    def _handshake(self, websocket: WebSocket) -> None:
        scope = websocket.scope
        headers = tuple(scope["headers"])
        self.requests.append(
            Recorded("WEBSOCKET", scope["path"], scope["query_string"], headers, b"")
        )

    def window(self, model: str) -> int:
        return self.windows.get(model, self.default_window)


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for n, v in scope["headers"] if n.lower() == name), None)


def _headers(request: Request) -> dict[str, str]:
    return {"content-type": "application/json", "x-fake-path": request.url.path}


async def _not_found(request: Request) -> Response:
    message = f"Invalid URL ({request.method} {request.url.path})"
    return Response(
        rules.error_body(message, None, None), 404, {"content-type": "application/json"}
    )


class _Recorder:
    """Pure-ASGI wrapper: records the raw request, applies a scripted status or stall."""

    def __init__(self, fake: FakeOpenAI, app: Starlette) -> None:
        self.fake = fake
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read(receive)
        self.fake.requests.append(
            Recorded(
                scope["method"], scope["path"], scope["query_string"], tuple(scope["headers"]), body
            )
        )
        if not _authorized(self.fake.api_key, scope["headers"]):
            await _respond(send, 401, rules.invalid_api_key(scope["headers"]))
            return
        listing = scope["method"] == "GET" and scope["path"].endswith("/models")
        behavior = self.fake.next_behavior(listing)
        scope["fake.behavior"] = behavior
        if behavior.stall_s and not await _sleep(behavior.stall_s, receive):
            self.fake.disconnected.set()
            return
        if behavior.status is not None:
            await _respond(send, behavior.status, behavior.body, behavior.headers)
        else:
            await self.app(scope, _replay(body, receive), send)


def _authorized(api_key: str | None, headers: list[tuple[bytes, bytes]]) -> bool:
    if api_key is None:
        return True
    return (b"authorization", f"Bearer {api_key}".encode()) in headers


async def _read(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return again


async def _sleep(seconds: float, receive: Receive) -> bool:
    """Sleep unless the client disconnects first; True if the sleep ran its course."""
    try:
        await asyncio.wait_for(_until_disconnect(receive), seconds)
    except TimeoutError:
        return True
    return False


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _respond(
    send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    start = [JSON, (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


async def _respond_partially(send: Send, body: bytes, keep: int) -> None:
    start = [JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    await send({"type": "http.response.body", "body": body[:keep], "more_body": True})
    raise ConnectionAbortedError("fake upstream dropped the body on purpose")


class _Chat:
    """POST /v1/chat/completions: validate strictly, then answer or stream."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        behavior: Behavior = scope["fake.behavior"]
        raw = (await receive())["body"]
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await _respond(send, 400, rules.error_body(rules.INVALID_JSON, None, None))
            return
        model = body.get("model") if isinstance(body, dict) else None
        encoding = _encoding(model)
        problem = rules.check_request(body, encoding, self.fake.window(str(model)))
        if problem is not None:
            self.fake.sent.append(problem)
            await _respond(send, 400, problem)
            return
        prompt = rules.count_prompt(body["messages"], encoding)
        completion = rules.completion(body, behavior, prompt, encoding)
        if self.fake.cache is not None:
            session = _header(scope, b"x-session-id") or ""
            cached = self.fake.cache.cached(body, encoding, prompt, session)
            completion["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        if body.get("stream"):
            events = rules.chunks(body, completion)
            self.fake.sent.append(b"".join(events))
            await _Stream(self.fake, behavior, send, receive).run(events)
            return
        payload = orjson.dumps(completion)
        extra = behavior.headers
        if behavior.gzip:
            payload = gzip.compress(payload)
            extra = (*extra, (b"content-encoding", b"gzip"))
        self.fake.sent.append(payload)
        if behavior.abort_after is not None:
            await _respond_partially(send, payload, behavior.abort_after)
            return
        await _respond(send, 200, payload, extra)


class _Responses:
    """POST /v1/responses: validate strictly (`responses_rules`), then answer or stream."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        behavior: Behavior = scope["fake.behavior"]
        raw = (await receive())["body"]
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            await _respond(send, 400, rules.error_body(rules.INVALID_JSON, None, None))
            return
        model = body.get("model") if isinstance(body, dict) else None
        encoding = _encoding(model)
        problem = responses_rules.check_request(body, encoding, self.fake.window(str(model)))
        if problem is not None:
            if self.fake.requeue_refused:
                self.fake.queue_first(behavior)
            self.fake.sent.append(problem)
            await _respond(send, 400, problem)
            return
        prompt = responses_rules.count_prompt(body, encoding)
        done = responses_rules.response(body, behavior, prompt, encoding)
        if body.get("stream"):
            events = responses_rules.events(done)
            self.fake.sent.append(b"".join(events))
            await _Stream(self.fake, behavior, send, receive).run(events)
            return
        payload = orjson.dumps(done)
        self.fake.sent.append(payload)
        await _respond(send, 200, payload, behavior.headers)


def _encoding(model: object) -> tiktoken.Encoding:
    try:
        return tiktoken.encoding_for_model(str(model))
    except KeyError:
        return tiktoken.get_encoding("o200k_base")


class _Stream:
    """Relays SSE chunks with the behavior's pacing; notices a client that leaves."""

    def __init__(self, fake: FakeOpenAI, behavior: Behavior, send: Send, receive: Receive) -> None:
        self.fake, self.behavior, self.send, self.receive = fake, behavior, send, receive

    async def run(self, events: list[bytes]) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), *self.behavior.headers]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        pump = asyncio.ensure_future(self._pump(events))
        watch = asyncio.ensure_future(_until_disconnect(self.receive))
        await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        if not pump.done():
            self.fake.disconnected.set()
            pump.cancel()
        watch.cancel()
        await asyncio.wait((pump, watch))
        if not pump.cancelled() and pump.exception() is not None:
            raise ConnectionAbortedError("fake upstream dropped the stream on purpose")

    async def _pump(self, events: list[bytes]) -> None:
        b = self.behavior
        for i, event in enumerate(events, 1):
            await self.send({"type": "http.response.body", "body": event, "more_body": True})
            if b.abort_after is not None and i >= b.abort_after:
                raise ConnectionAbortedError
            if i == 1 and b.release is not None:
                await _wait_event(b.release)
            if i == b.pause_after:
                await asyncio.sleep(b.pause_s)
            if b.chunk_delay_s:
                await asyncio.sleep(b.chunk_delay_s)
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_event(event: threading.Event, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not event.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
