"""Bounded inflation of a gzip or deflate body the proxy reads itself (a summarizer's reply).

A compressed body says nothing true about its inflated size: 1 MB of gzip can inflate to
1 GB. So a body is inflated incrementally (`zlib.decompressobj` with `max_length`) and
given up on as soon as its output passes the caller's limit, so what it costs in memory is
that limit, not the body's claim. At most `INLINE_BYTES` of output are made on the event
loop; a body with more to give is finished in a worker thread.
"""

from __future__ import annotations

import asyncio
import zlib

WBITS = zlib.MAX_WBITS | 32
"""A gzip or a zlib header, told apart by zlib itself."""
INLINE_BYTES = 64 * 1024
"""Inflated on the event loop before the rest moves to a thread: a summary's whole reply
(a few KB), at well under a millisecond."""


class InflateError(Exception):
    """The body inflates past the limit, or is not a whole gzip/deflate stream."""


class Inflater:
    """One body's inflation, `limit` bytes at most, done in steps (`step`)."""

    __slots__ = ("_inflater", "_limit", "_member", "_out", "_pending", "_size")

    def __init__(self, body: bytes, limit: int) -> None:
        self._inflater = zlib.decompressobj(WBITS)
        self._member = False
        """Whether the current gzip member has begun (a body may hold several)."""
        self._pending = body
        self._limit = limit
        self._out: list[bytes] = []
        self._size = 0

    def step(self, most: int) -> bool:
        """Inflate up to about `most` more bytes; True once the whole body is inflated."""
        while self._pending and most > 0:
            room = min(most, self._limit - self._size + 1)
            try:
                chunk = self._inflater.decompress(self._pending, room)
            except zlib.error as exc:
                raise InflateError(f"not a valid gzip/deflate body ({exc})") from None
            self._member = True
            self._size += len(chunk)
            most -= len(chunk)
            if self._size > self._limit:
                raise InflateError(f"the body inflates past {self._limit} bytes")
            self._out.append(chunk)
            self._pending = self._inflater.unconsumed_tail
            if self._inflater.eof and not self._pending:
                self._pending = self._inflater.unused_data  # the next member, if any
                self._inflater, self._member = zlib.decompressobj(WBITS), False
        if self._pending:
            return False
        if self._member:
            raise InflateError("the gzip/deflate body is cut short")
        return True

    def finish(self) -> bytes:
        """The whole inflated body (`InflateError` past the limit, or if it is cut short)."""
        while not self.step(INLINE_BYTES):
            pass
        return b"".join(self._out)


async def inflate(body: bytes, limit: int) -> bytes:
    """`body` (gzip or deflate) inflated, at most `limit` bytes, else `InflateError`; past
    `INLINE_BYTES` of output the rest is inflated in a thread."""
    inflater = Inflater(body, limit)
    if inflater.step(INLINE_BYTES):
        return inflater.finish()
    return await asyncio.to_thread(inflater.finish)
