"""An upstream on a raw socket that records each request's head exactly as it arrived on the
wire: request line and header bytes, before any HTTP library could decode or normalize them.

Every request gets the same small chat completion and `Connection: close`, so each request
is one connection and the recording needs no framing beyond the head and Content-Length.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

import orjson

from tests.fakes.servers import HOST

WAIT_S = 10.0
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
    }
)


@dataclass(frozen=True, slots=True)
class RawRequest:
    """One request as it arrived: the request line and header lines, undecoded."""

    line: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    @property
    def method(self) -> bytes:
        return self.line.split(b" ")[0]

    @property
    def target(self) -> bytes:
        return self.line.split(b" ")[1]

    def header(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)


class RawUpstream:
    """A one-thread HTTP/1.1 server on loopback recording raw request heads."""

    def __init__(self) -> None:
        self.requests: list[RawRequest] = []
        self._stop = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.origin = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(WAIT_S)
                try:
                    self._answer(conn)
                except OSError:
                    continue

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        line, *lines = head.split(b"\r\n")
        headers = tuple(_split(raw) for raw in lines)
        length = next((int(v) for n, v in headers if n.lower() == b"content-length"), 0)
        while len(body) < length and (chunk := conn.recv(65536)):
            body += chunk
        self.requests.append(RawRequest(line, headers, body))
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: "
            + str(len(COMPLETION)).encode()
            + b"\r\n\r\n"
            + (b"" if line.startswith(b"HEAD ") else COMPLETION)
        )


def _split(line: bytes) -> tuple[bytes, bytes]:
    name, _, value = line.partition(b":")
    return name, value.strip(b" \t")
