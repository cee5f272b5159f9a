"""Cache keys and the bounded cache the token counter keeps them in.

A key is a SHA-256 of a value's canonical bytes, cut to 16 bytes: Python's 64-bit hash
measured faster, but a collision would silently give one message another's count.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import orjson

from policies.encoders import Encoder, EstimatingEncoder
from policies.messages import MAPPING, Message

V = TypeVar("V")

# Contents at least this long are hashed apart from the rest of their message.
SPLIT_HASH_CHARS = 1024


class Lru(Generic[V]):
    """A bounded, thread-safe map of digests to values; the least recently used go first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[bytes, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Iterable[bytes]) -> list[V | None]:
        out: list[V | None] = []
        with self._lock:
            data = self._data
            for key in keys:
                value = data.get(key)
                if value is not None:
                    data.move_to_end(key)
                out.append(value)
        return out

    def get(self, key: bytes) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
        return value

    def get_or_compute(self, key: bytes, compute: Callable[[], V]) -> V:
        """The value under `key`, computed and stored when missing (outside the lock: two
        threads may both compute a missing value; the values are equal)."""
        value = self.get(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value

    def put(self, key: bytes, value: V) -> None:
        with self._lock:
            data = self._data
            data[key] = value
            if len(data) > self._capacity:
                data.popitem(last=False)

    def put_many(self, items: Iterable[tuple[bytes, V]]) -> None:
        with self._lock:
            data = self._data
            data.update(items)
            while len(data) > self._capacity:
                data.popitem(last=False)


class ByIdentity(Generic[V]):
    """Values computed from objects seen recently, found by the object, not by hashing it:
    a tools list that requests share (the proxy keeps one copy of equal ones) is hashed
    once, not on every request. It holds the objects, so an `id` here stays theirs; the
    oldest go first past `size`. Thread-safe."""

    __slots__ = ("_items", "_lock", "_size")

    def __init__(self, size: int = 8) -> None:
        self._items: dict[tuple[int, bytes], tuple[object, V]] = {}
        self._size = size
        self._lock = threading.Lock()

    def get_or_compute(self, obj: object, tag: bytes, compute: Callable[[], V]) -> V:
        """The value for `obj` under `tag`, computed and kept when missing."""
        hit = self._items.get((id(obj), tag))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = compute()
        with self._lock:
            if len(self._items) >= self._size:
                del self._items[next(iter(self._items))]
            self._items[(id(obj), tag)] = (obj, value)
        return value


def namespace(kind: bytes, enc: Encoder) -> bytes:
    """What starts every key of this kind and encoding."""
    # Estimated and exact counts of one encoding must never share cache entries.
    tag = ("~" if isinstance(enc, EstimatingEncoder) else "") + enc.name
    return kind + b"\0" + tag.encode() + b"\0"


def digest(prefix: bytes, data: bytes) -> bytes:
    return hashlib.sha256(prefix + data).digest()[:16]


def message_key(prefix: bytes, msg: Message) -> bytes:
    """A message's digest. A long string content, most of a message's bytes, is hashed as
    UTF-8 after the other fields as JSON: cheaper than escaping it into JSON, and as
    unambiguous, as JSON text never holds a NUL byte. A short message is hashed as JSON in
    one call, which costs a third of the two-part hash."""
    content = msg.get("content") if isinstance(msg, MAPPING) else None
    if isinstance(content, str) and len(content) >= SPLIT_HASH_CHARS:
        try:
            rest = orjson.dumps(
                {k: v for k, v in msg.items() if k != "content"}, option=orjson.OPT_SORT_KEYS
            )
        except TypeError:
            pass
        else:
            h = hashlib.sha256(prefix)
            h.update(b"s")
            h.update(rest)
            h.update(b"\0")
            update_text(h, content)
            return h.digest()[:16]
    return digest(prefix + b"j", json_bytes(msg))


TEXT_SLICE_CHARS = 1 << 20
"""A long text is encoded for hashing a slice at a time: one `str.encode` of 25 MB holds
the GIL for tens of milliseconds, every other thread (the event loop too) waiting."""


def update_text(h: Any, text: str) -> None:
    """`h.update(text as UTF-8)`, a slice at a time (hashlib lets go of the GIL itself)."""
    for i in range(0, len(text), TEXT_SLICE_CHARS):
        h.update(text[i : i + TEXT_SLICE_CHARS].encode("utf-8", "surrogatepass"))


def json_bytes(value: object) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        # Not plain JSON (a library caller's objects, lone surrogates): repr is stable too.
        return repr(value).encode("utf-8", "surrogatepass")


def str_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
