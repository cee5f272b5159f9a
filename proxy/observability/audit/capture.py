"""Capturing a relayed response body for the audit log.

The relay calls `feed` with every chunk it forwards, so that call only appends to a list,
capped so that a runaway stream cannot exhaust memory. Parsing happens later, in the audit
writer thread, by the request's protocol (`WireProtocol.assemble`) on the joined bytes.
"""

from __future__ import annotations

DEFAULT_MAX_BYTES = 4 * 1024 * 1024


class BodyCapture:
    """Collects response bytes as they are relayed; parses them later, off the request path."""

    __slots__ = ("_parts", "_size", "max_bytes", "truncated")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.max_bytes = max_bytes
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.max_bytes - self._size
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self._parts.append(chunk)
            self._size += len(chunk)

    @property
    def size(self) -> int:
        return self._size

    def data(self) -> bytes:
        return b"".join(self._parts)
