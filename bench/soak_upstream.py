"""The soak's upstream: an ASGI app whose answer is chosen by the `x-soak` request header.

- stream (and abort, which the client cuts): `events` SSE events `gap_s` apart, then [DONE]
- error: 500 with an OpenAI-shaped body
- timeout: no answer until the proxy gives up (it is asked on a route with a short read
  timeout) or `stall_s` passes
- reset: three events, then the connection drops
"""

from __future__ import annotations

import asyncio
import contextlib

import orjson
from starlette.types import Receive, Scope, Send


class SoakUpstream:
    """ASGI upstream whose answer is chosen by the `x-soak` request header."""

    def __init__(self, stall_s: float, events: int = 20, gap_s: float = 0.01) -> None:
        self.stall_s, self.events, self.gap_s = stall_s, events, gap_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        mode = dict(scope["headers"]).get(b"x-soak", b"stream").decode()
        if mode == "error":
            body = b'{"error":{"message":"soak 5xx","type":"server_error"}}'
            await _start(send, 500, b"application/json")
            await send({"type": "http.response.body", "body": body})
            return
        if mode == "timeout":
            await _until_gone(receive, self.stall_s)
            return
        await _start(send, 200, b"text/event-stream")
        for i in range(self.events):
            delta = {"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}
            event = b"data: " + orjson.dumps(delta) + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": True})
            if mode == "reset" and i == 2:
                raise ConnectionResetError("soak upstream drops the stream on purpose")
            await asyncio.sleep(self.gap_s)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _start(send: Send, status: int, content_type: bytes) -> None:
    headers = [(b"content-type", content_type)]
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _until_gone(receive: Receive, limit_s: float) -> None:
    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(gone(), limit_s)
