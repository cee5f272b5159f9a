"""Requests share one copy of an identical tools list.

An agent sends the same tool definitions with every request, and each request holds its
parsed body until its exchange ends: the audit record and the spend read it then, and a
stream lasts as long as the model writes. A coding agent's tools are 5-60 KB of JSON and
3-4x that as Python objects, so 500 concurrent streams of one agent held 500 equal copies.
Now a request whose `tools` serialize to the same bytes as a list seen recently takes
that list instead of its own, and its own is freed at once.

The lists seen most recently are kept, up to `SHARED_BYTES` of their JSON, so an agent's
next turn finds its list too, not only the turns in flight beside it: a registry of
weak references found nothing for sequential turns and cost ~13 us a request to fill and
empty; this one costs ~3 us, mostly the serialization that gives the key. Equal means the
same JSON bytes, key order included, so what goes upstream is unchanged (a curated body is
re-serialized from the shared list) and so is every digest of it. Nothing in the proxy
mutates a request's tools; shared lists must stay that way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import orjson

SHARED_KEYS = ("tools", "functions")
"""The body's keys whose lists are shared: tool definitions, and the legacy functions."""
SHARED_BYTES = 1 << 20
"""The JSON bytes of the lists kept, at most (as Python objects, ~3-4x that): a few dozen
agents' tools."""


class SharedTools:
    """The tools lists seen most recently, by their JSON bytes. Thread-safe."""

    __slots__ = ("_bytes", "_limit", "_lists", "_lock")

    def __init__(self, limit_bytes: int = SHARED_BYTES) -> None:
        self._limit = limit_bytes
        self._lists: OrderedDict[bytes, list[Any]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def share(self, body: dict[str, Any]) -> None:
        """Point `body`'s tools (`SHARED_KEYS`) at an equal list seen recently, if there is
        one; else keep its own for the requests that come after."""
        for key in SHARED_KEYS:
            value = body.get(key)
            if type(value) is list and value:
                body[key] = self.shared(value)

    def shared(self, value: list[Any]) -> list[Any]:
        """The list seen recently that serializes like `value`, else `value`, kept."""
        try:
            data = orjson.dumps(value)
        except TypeError:  # not plain JSON (a library caller's objects): kept as it is
            return value
        with self._lock:
            found = self._lists.get(data)
            if found is not None:
                self._lists.move_to_end(data)
                return found
            self._lists[data] = value
            self._bytes += len(data)
            while self._bytes > self._limit:  # a list over the limit alone is not kept either
                self._bytes -= len(self._lists.popitem(last=False)[0])
        return value

    def __len__(self) -> int:
        """How many distinct lists are kept."""
        return len(self._lists)
