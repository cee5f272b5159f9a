"""The admin listener's open connections: at most `MAX_CONNECTIONS` at once, the one that has
waited longest for its request head closed to make room (585 idle connections to the admin
port once used up the descriptors the public listener needed)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

MAX_CONNECTIONS = 32
"""Open admin connections at once, per worker: well inside the descriptors the worker keeps
back from its public listener (`conn_limits.RESERVED_FDS`)."""


class Connections:
    """The listener's open connections, and which of them still wait for a request head."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: set[asyncio.StreamWriter] = set()
        self.waiting: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()

    def admit(self, writer: asyncio.StreamWriter) -> bool:
        """Count `writer` in, closing the longest-waiting one to make room if need be;
        False when every open connection is past its head (being answered)."""
        if len(self.open) >= self.limit:
            if not self.waiting:
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.open.discard(oldest)
            oldest.transport.abort()
        self.open.add(writer)
        self.waiting[writer] = None
        return True

    def headed(self, writer: asyncio.StreamWriter) -> None:
        self.waiting.pop(writer, None)

    def closed(self, writer: asyncio.StreamWriter) -> None:
        self.open.discard(writer)
        self.waiting.pop(writer, None)
