"""A scripted HTTP/1.1 upstream on a loopback socket, for the upstream clients' own tests:
each failure phase (silence, a cut or stalled body, a hang-up, a reset, bytes that are no
HTTP) and each way a response can end (a length, chunks, the connection's end) on demand."""

from __future__ import annotations

import gzip
import socket
import struct
import threading

import httpx

from proxy.upstream.client import UpstreamRequest, UpstreamResponse
from tests.fakes.servers import HOST

WAIT_S = 10.0
GZIPPED = gzip.compress(b'{"object": "list", "data": []}' * 20)
BIG = 8 * 1024 * 1024


class ScriptedUpstream:
    """HTTP/1.1 on loopback, one thread per connection; the first path segment picks the
    answer. Every answer names its connection's serial in `x-conn`, so tests can see reuse."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.05)
        self.origin = f"http://{HOST}:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> ScriptedUpstream:
        self._acceptor.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._acceptor.join(WAIT_S)
        for thread in self._threads:
            thread.join(WAIT_S)
        self._listener.close()

    def _accept(self) -> None:
        serial = 0
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            serial += 1
            thread = threading.Thread(target=self._serve, args=(conn, serial), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, serial: int) -> None:
        with conn:
            conn.settimeout(WAIT_S)
            try:
                count = 0
                while (request := _read_request(conn)) is not None:
                    count += 1
                    if request[0].startswith(b"/flaky") and count > 1:
                        return  # a kept-alive connection the upstream gave up on
                    if not self._answer(conn, serial, *request):
                        return
            except OSError:
                return  # the client left: expected in the tests that cut reads short

    def _answer(self, conn: socket.socket, serial: int, target: bytes, raw: bytes) -> bool:
        """Answers one request; False closes the connection."""
        name = target.split(b"?")[0].split(b"/")[1]
        conn_header = b"x-conn: %d\r\n" % serial
        if name == b"silent":  # reads the request, never answers
            self._stop.wait(WAIT_S)
            return False
        if name == b"hangup":  # closes without a word
            return False
        if name == b"reset":  # an RST instead of a FIN
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if name in (b"cut", b"stall"):  # promises 100 bytes, sends 10
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n" + conn_header)
            conn.sendall(b"\r\n0123456789")
            if name == b"stall":
                self._stop.wait(WAIT_S)
            return False
        if name == b"big":  # more than the socket buffers hold, so the client must read
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n" % BIG + conn_header)
            conn.sendall(b"\r\n" + b"x" * BIG)
            return True
        if name == b"chunked":
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n" + conn_header + b"\r\n"
                b"2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"
            )
            return True
        if name == b"eof":  # no length, not chunked: the body ends with the connection
            conn.sendall(b"HTTP/1.1 200 OK\r\n" + conn_header + b"\r\nuntil the end")
            return False
        if name == b"close":  # a length, and no keep-alive
            conn.sendall(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n")
            conn.sendall(conn_header + b"\r\nok")
            self._stop.wait(0.3)  # a client that ignored the close would send its next here
            return False
        if name == b"early":  # an interim 103 before the answer
            conn.sendall(b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n")
        if name == b"head":  # what a HEAD gets: the length a GET's body would have
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n" + conn_header + b"\r\n")
            return True
        if name == b"endless":  # headers that never end
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            for _ in range(64):
                conn.sendall(b"x-filler: " + b"f" * 32768 + b"\r\n")
            self._stop.wait(WAIT_S)
            return False
        if name == b"garbage":
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: nope\r\n\r\nok")
            return False
        if name == b"late":
            self._stop.wait(0.3)
        extra, body = {
            b"echo": (b"", raw),
            b"gzip": (b"content-encoding: gzip\r\n", GZIPPED),
            b"redirect": (b"location: /ok\r\n", b""),
            b"cookie": (b"set-cookie: session=secret; Path=/\r\n", b""),
        }.get(name, (b"", b"ok"))
        status = b"302 Found" if name == b"redirect" else b"200 OK"
        conn.sendall(
            b"HTTP/1.1 " + status + b"\r\ncontent-length: %d\r\n" % len(body) + extra
            + conn_header + b"\r\n" + body
        )  # fmt: skip
        return True


def _read_request(conn: socket.socket) -> tuple[bytes, bytes] | None:
    """(target, the request's head and body as received), None when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    while len(body) < length and (chunk := conn.recv(65536)):
        body += chunk
    return head.split(b" ")[1], head + b"\r\n\r\n" + body


def req(
    upstream: ScriptedUpstream,
    target: str,
    *,
    method: str = "GET",
    headers: tuple[tuple[bytes, bytes], ...] = (),
    body: bytes = b"",
    read_timeout_s: float = WAIT_S,
) -> UpstreamRequest:
    return UpstreamRequest(
        method, upstream.origin + target, headers, body, WAIT_S, read_timeout_s=read_timeout_s
    )


async def read_all(response: UpstreamResponse) -> bytes:
    chunks: list[bytes] = []
    await read_into(response, chunks)
    return b"".join(chunks)


async def read_into(response: UpstreamResponse, received: list[bytes]) -> None:
    """Reads to the end (b""), keeping what arrives, so a failure can be seen after it."""
    while chunk := await response.read():
        received.append(chunk)


def header(response: UpstreamResponse, name: bytes) -> bytes | None:
    return next((v for n, v in response.headers if n.lower() == name), None)


def recording(seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    """A mock transport that keeps each request it is given in `seen` and answers `status`."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status)

    return httpx.MockTransport(handle)
