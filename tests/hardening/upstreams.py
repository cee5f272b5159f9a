"""Upstreams the suite scripts besides the strict fake: a trap nothing may contact, one that
hangs up, one that answers raw bytes, one that plays scripted answers, a quick one for
volume, and a firehose.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from tests.fakes.servers import HOST
from tests.hardening.support import WAIT_S


class Trap:
    """An ASGI app that must never be contacted: it records anything that reaches it."""

    def __init__(self) -> None:
        self.hits: list[str] = []

    async def __call__(self, scope: Scope, _receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.hits.append(f"{scope['method']} {scope['path']}")
        body = b'{"trap": true}'
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class HangUp:
    """A raw TCP upstream that reads each request's head and closes without answering."""

    def __init__(self) -> None:
        self.requests = 0
        self._stop = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(WAIT_S)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                if data:
                    self.requests += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._listener.close()


class RawUpstream:
    """A TCP upstream that reads each request's head and answers with `reply`, then closes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self._stop = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(WAIT_S)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                conn.sendall(self.reply)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._listener.close()


@dataclass(frozen=True, slots=True)
class Scripted:
    """One scripted answer: status, extra headers, and body pieces each sent on its own."""

    pieces: tuple[bytes, ...]
    status: int = 200
    headers: tuple[tuple[bytes, bytes], ...] = ()
    content_type: bytes = b"text/event-stream"


class ScriptedUpstream:
    """An upstream that plays `Scripted` answers in order, recording each request body."""

    def __init__(self, *answers: Scripted) -> None:
        self.answers = list(answers)
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.bodies.append(b"".join(chunks))
        answer = self.answers.pop(0)
        headers = [(b"content-type", answer.content_type), *answer.headers]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        for piece in answer.pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def sse_events(*deltas: Mapping[str, Any]) -> list[bytes]:
    """A chat.completion.chunk SSE stream carrying `deltas` (choice 0), then [DONE]."""
    events = []
    for delta in deltas:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
        chunk["choices"] = [{"index": 0, "delta": dict(delta), "finish_reason": None}]
        events.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
    return [*events, b"data: [DONE]\n\n"]


class Quick:
    """A minimal upstream for volume: any request gets the same small completion (or, for
    `"stream": true`, a three-event stream), and is counted."""

    COMPLETION = orjson.dumps(
        {
            "id": "chatcmpl-quick",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        }
    )
    STREAM = b"".join(sse_events({"role": "assistant", "content": ""}, {"content": "ok"}))

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests += 1
        stream = b'"stream":true' in body
        kind = b"text/event-stream" if stream else b"application/json"
        payload = self.STREAM if stream else self.COMPLETION
        headers = [(b"content-type", kind), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


class Firehose:
    """An upstream that streams `total` bytes of SSE as fast as its socket takes them.

    `sent` counts the bytes uvicorn has accepted; when the reader stops reading, the
    transport's flow control holds `send`, so `sent` stops growing.
    """

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.total, self.chunk = total, chunk
        self.sent = 0
        self.done = threading.Event()

    def event(self) -> bytes:
        data = b"x" * (self.chunk - 8)
        return b"data: " + data + b"\n\n"

    async def __call__(self, scope: Scope, _receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        event = self.event()
        while self.sent < self.total:
            await send({"type": "http.response.body", "body": event, "more_body": True})
            self.sent += len(event)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        self.done.set()
