"""A tiny, fast, fixed-response OpenAI upstream on a raw asyncio Protocol (keep-alive).

Used when nginx is not installed. It parses just enough HTTP/1.1 to find where a request
ends (Content-Length or chunked) and answers by path prefix, never looking at the body:

- `/v1/...`         a fixed chat completion JSON
- `/sse/v1/...`     an SSE stream: the first event at once, then the rest with gaps
- `/trickle/v1/...` a slow SSE stream that holds the connection for seconds
- `/healthz`        200

Run: `python -m bench.upstream --port 18090`. It prints `ready` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from typing import cast

CHAT_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench0000000000000000000000",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "I will run the tests next."},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 9, "total_tokens": 1209},
    },
    separators=(",", ":"),
).encode()


def sse_events(count: int) -> list[bytes]:
    """`count` chat.completion.chunk events, then `data: [DONE]`."""
    events = []
    for k in range(count):
        chunk = {
            "id": "chatcmpl-bench0000000000000000000000",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f"token{k} "} if k else {"role": "assistant"},
                    "finish_reason": "stop" if k == count - 1 else None,
                }
            ],
        }
        events.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


@dataclass(frozen=True, slots=True)
class Plan:
    """How the streams behave: events per stream and the pause between them."""

    sse_events: int = 6
    sse_gap_s: float = 0.01
    trickle_events: int = 40
    trickle_gap_s: float = 0.25


JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
    b"Connection: keep-alive\r\n\r\n" % len(CHAT_COMPLETION)
)
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)
HEALTH = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


def request_end(buf: bytearray) -> tuple[bytes, int] | None:
    """(path, bytes the whole request takes) once `buf` holds a complete request."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = bytes(buf[:head_end]).lower()
    path = bytes(buf[: buf.find(b"\r\n")]).split(b" ")[1]
    start = head_end + 4
    if b"transfer-encoding: chunked" in head:
        return _chunked_end(buf, start, path)
    marker = head.find(b"content-length:")
    length = 0
    if marker >= 0:
        line_end = head.find(b"\r\n", marker)
        length = int(head[marker + 15 : line_end if line_end >= 0 else None])
    return (path, start + length) if len(buf) >= start + length else None


def _chunked_end(buf: bytearray, pos: int, path: bytes) -> tuple[bytes, int] | None:
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
        pos = line_end + 2 + size + 2
        if len(buf) < pos:
            return None
        if size == 0:
            return path, pos


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class UpstreamProtocol(asyncio.Protocol):
    """One keep-alive connection. Requests are answered strictly in order."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, _exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._serve()

    def _serve(self) -> None:
        while not self.streaming and self.transport is not None:
            found = request_end(self.buf)
            if found is None:
                return
            path, size = found
            del self.buf[:size]
            self._answer(path)

    def _answer(self, path: bytes) -> None:
        assert self.transport is not None
        if path.startswith(b"/sse/"):
            self._stream(sse_events(self.plan.sse_events), self.plan.sse_gap_s)
        elif path.startswith(b"/trickle/"):
            self._stream(sse_events(self.plan.trickle_events), self.plan.trickle_gap_s)
        elif path.startswith(b"/healthz"):
            self.transport.write(HEALTH)
        else:
            self.transport.write(JSON_HEAD + CHAT_COMPLETION)

    def _stream(self, events: list[bytes], gap: float) -> None:
        assert self.transport is not None
        self.streaming = True
        self.transport.write(SSE_HEAD + _chunk(events[0]))
        loop = asyncio.get_running_loop()
        loop.call_later(gap, self._next_event, events, 1, gap)

    def _next_event(self, events: list[bytes], k: int, gap: float) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if k < len(events):
            self.transport.write(_chunk(events[k]))
            asyncio.get_running_loop().call_later(gap, self._next_event, events, k + 1, gap)
            return
        self.transport.write(b"0\r\n\r\n")
        self.streaming = False
        self._serve()


async def serve(host: str, port: int, plan: Plan) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: UpstreamProtocol(plan), host, port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    default = Plan()
    parser.add_argument("--sse-events", type=int, default=default.sse_events)
    parser.add_argument("--sse-gap-ms", type=float, default=default.sse_gap_s * 1000)
    parser.add_argument("--trickle-events", type=int, default=default.trickle_events)
    parser.add_argument("--trickle-gap-ms", type=float, default=default.trickle_gap_s * 1000)
    args = parser.parse_args(argv)
    plan = Plan(
        args.sse_events, args.sse_gap_ms / 1000, args.trickle_events, args.trickle_gap_ms / 1000
    )
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port, plan))
        return
    uvloop.run(serve(args.host, args.port, plan))


if __name__ == "__main__":
    main()
