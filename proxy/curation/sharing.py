"""Requests in flight share one copy of an identical tools list.

An agent sends the same tool definitions with every request, and each request holds its
parsed body until its exchange ends: the audit record and the spend read it then, and a
stream lasts as long as the model writes. A coding agent's tools are 5-60 KB of JSON and
3-4x that as Python objects, so 500 concurrent streams of one agent held 500 equal copies.
Now the second request whose `tools` serialize to the same bytes as one still in flight
takes that one's list instead of its own, and its own is freed at once.

The registry holds the lists weakly: a list lives as long as a request holds it, never
longer, so it costs nothing once the requests end, and there is nothing to size. Equal
means the same JSON bytes, key order included, so what goes upstream is unchanged (a
curated body is re-serialized from the shared list) and so is every digest of it. Nothing
in the proxy mutates a request's tools; shared lists must stay that way.
"""

from __future__ import annotations

import weakref
from typing import Any

import orjson

SHARED_KEYS = ("tools", "functions")
"""The body's keys whose lists are shared: tool definitions, and the legacy functions."""


class SharedList(list[Any]):
    """A list the registry can hold weakly (a plain list takes no weak reference)."""

    __slots__ = ("__weakref__",)


class SharedTools:
    """The tools lists of the requests in flight, by their JSON bytes."""

    __slots__ = ("_live",)

    def __init__(self) -> None:
        self._live: weakref.WeakValueDictionary[bytes, SharedList] = weakref.WeakValueDictionary()

    def share(self, body: dict[str, Any]) -> None:
        """Point `body`'s tools (`SHARED_KEYS`) at an equal list in flight, if there is one;
        else register them for the requests that come while this one is in flight."""
        for key in SHARED_KEYS:
            value = body.get(key)
            if type(value) is list and value:  # a SharedList is shared already
                body[key] = self.shared(value)

    def shared(self, value: list[Any]) -> list[Any]:
        """The list in flight that serializes like `value`, else `value` as one."""
        try:
            data = orjson.dumps(value)
        except TypeError:  # not plain JSON (a library caller's objects): kept as it is
            return value
        found = self._live.get(data)
        if found is not None:
            return found
        made = SharedList(value)
        self._live[data] = made
        return made

    def __len__(self) -> int:
        """How many distinct lists requests hold now."""
        return len(self._live)
