"""Redacted messages as stored, and the audit writer's cache of them (agents resend their
history every turn)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

import orjson

REDACTED_MARK = b"[REDACTED:"
"""What starts every redaction label (`redact.Redactor`)."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A redacted message as stored: canonical JSON bytes and their hash. Messages are
    equal when their hashes are."""

    digest: bytes
    data: bytes | None = field(compare=False)
    """None in a record for a store that keeps bodies by reference (`RecordBuilder`'s
    `by_reference`), for a message the cache knew: `AuditRecord.body` makes it again in
    the rare case the store lacks it."""
    redacted: bool = field(default=False, compare=False)
    """Whether redaction took something out (looked for once: a cached message is
    asked again on every request that resends it)."""

    def __post_init__(self) -> None:
        if self.data is not None:
            object.__setattr__(self, "redacted", REDACTED_MARK in self.data)

    def without_body(self) -> StoredMessage:
        return StoredMessage(self.digest, None, self.redacted)


ENTRY_BYTES = 250
"""What an entry with a body costs besides the body: the key, the hash, the tuple, the LRU's
link (measured: ~230 bytes on CPython 3.11)."""
SLIM_ENTRY_BYTES = 190
"""What an entry without a body costs: one `bytes` instead of the tuple and the hash
(tracemalloc: 204 against 267 bytes an entry, so 250 scaled alike)."""
Entry = bytes | tuple[bytes, bytes, bool]
"""What the cache holds of a `StoredMessage`: without a body (a store that keeps them by
reference), its digest and a flag byte in one `bytes`; with one, digest, body and flag."""
_FLAGS = (b"\x00", b"\x01")


@dataclass(slots=True)
class MessageCache:
    """LRU of redacted messages keyed by the raw message's hash, bounded in bytes: each
    entry counts its body plus `ENTRY_BYTES`, or `SLIM_ENTRY_BYTES` without a body.

    Agents resend their whole history every turn; without this the writer would redact
    the same messages again on every request. For a store that keeps bodies by reference
    the entries have none (`StoredMessage.without_body`): a hash and a flag for each
    message instead of its redacted JSON.

    Entries are plain bytes and tuples (`Entry`), not the `StoredMessage`s themselves: the
    garbage collector does not track bytes, and stops tracking a tuple of bytes and bools,
    while it walks every instance of a class at each full collection, every thread stopped
    meanwhile, the event loop too. In a worker holding ~50,000 messages after the bench's
    never-seen 127k-token histories, a full collection took 37-50 ms with the objects and
    11-27 ms with tuples; a hit costs ~0.3 us more (`stored_of`), ~0.08 ms of a resent
    127k-token history's record. A body-less entry as one `bytes` (digest and flag) instead
    of a tuple holding the digest: ~63 bytes less each, ~3 MB of a worker after the bench's
    cases.
    """

    max_bytes: int
    size: int = 0
    items: OrderedDict[bytes, Entry] = field(default_factory=OrderedDict)

    def get(self, key: bytes) -> StoredMessage | None:
        hit = self.items.get(key)
        if hit is None:
            return None
        self.items.move_to_end(key)
        return stored_of(hit)

    def put(self, key: bytes, value: StoredMessage) -> None:
        data = value.data
        entry: Entry = (
            value.digest + _FLAGS[value.redacted]
            if data is None
            else (value.digest, data, value.redacted)
        )
        if _cost(entry) > self.max_bytes // 4:
            return
        old = self.items.get(key)
        if old is not None:
            self.size -= _cost(old)
        self.items[key] = entry
        self.size += _cost(entry)
        while self.size > self.max_bytes:
            _, old = self.items.popitem(last=False)
            self.size -= _cost(old)


def _cost(entry: Entry) -> int:
    if isinstance(entry, bytes):
        return SLIM_ENTRY_BYTES
    return ENTRY_BYTES + len(entry[1])


_SET_DIGEST, _SET_DATA, _SET_REDACTED = (
    getattr(StoredMessage, name).__set__ for name in ("digest", "data", "redacted")
)


def stored_of(entry: Entry) -> StoredMessage:
    """The message an entry holds, made without `__init__`: a frozen dataclass's sets each
    field through `object.__setattr__`, and `__post_init__` would search the body for a
    redaction the entry has noted already (~0.6 against ~0.3 us, for each of a resent
    history's messages)."""
    message: StoredMessage = object.__new__(StoredMessage)
    if isinstance(entry, bytes):
        _SET_DIGEST(message, entry[:-1])
        _SET_DATA(message, None)
        _SET_REDACTED(message, entry[-1] == 1)
    else:
        _SET_DIGEST(message, entry[0])
        _SET_DATA(message, entry[1])
        _SET_REDACTED(message, entry[2])
    return message


def message_digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def raw_digest(value: object) -> bytes:
    """The cache key of a message (or tools list) as the client sent it."""
    return message_digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
