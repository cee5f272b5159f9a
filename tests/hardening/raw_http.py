"""Raw HTTP/1.1 over sockets, for what an HTTP client library would hide or refuse: a head
sent without its body, a chunked upload cut short, a connection dropped mid-stream; and
the kernel's view of the TCP connections that are left.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.servers import HOST
from tests.hardening.support import WAIT_S


def connect(port: int, *, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect, so the window is negotiated small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(WAIT_S)
    sock.connect((HOST, port))
    return sock


def request_head(
    method: str, target: str, headers: Mapping[str, str] | None = None, *, port: int = 0
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {HOST}:{port}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def read_response(sock: socket.socket) -> RawResponse:
    """One whole response (Content-Length or chunked framing, or until the peer closes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before a response head: {data!r}")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
    if "content-length" in headers:
        body = _read_exactly(sock, rest, int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = _read_chunked(sock, rest)
    else:
        body = rest + _read_to_close(sock)
    return RawResponse(int(status_line.split()[1]), headers, body)


def _read_exactly(sock: socket.socket, have: bytes, size: int) -> bytes:
    while len(have) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        have += chunk
    return have[:size]


def _read_to_close(sock: socket.socket) -> bytes:
    parts = []
    while chunk := sock.recv(65536):
        parts.append(chunk)
    return b"".join(parts)


def _read_chunked(sock: socket.socket, have: bytes) -> bytes:
    body = b""
    while True:
        while b"\r\n" not in have:
            have += _recv_more(sock)
        size_line, have = have.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        while len(have) < size + 2:
            have += _recv_more(sock)
        if size == 0:
            return body
        body, have = body + have[:size], have[size + 2 :]


def _recv_more(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise AssertionError("the connection closed early")
    return chunk


def recv_until(sock: socket.socket, marker: bytes) -> bytes:
    """Read until `marker` has arrived (e.g. the first SSE event after the head)."""
    data = b""
    while marker not in data:
        data += _recv_more(sock)
    return data


def drain_chunked(sock: socket.socket) -> int:
    """Read until a chunked body's last chunk; return how many bytes that took."""
    total, tail = 0, b""
    while not tail.endswith(b"\r\n0\r\n\r\n"):
        chunk = _recv_more(sock)
        total += len(chunk)
        tail = (tail + chunk)[-7:]
    return total


def send_all_tolerant(sock: socket.socket, data: bytes) -> int:
    """Send what the peer takes; a peer that already answered and closed ends it early."""
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent : sent + 65536])
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent


# -- the kernel's view of TCP connections ------------------------------------------------
HELD_STATES = frozenset({"01", "08"})
"""ESTABLISHED and CLOSE_WAIT: a connection some process still holds open."""


def connections_to(port: int) -> int:
    """Open TCP connections (this host, any process) whose remote end is loopback:`port`."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state in HELD_STATES and int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count
