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
"""What a cache entry costs besides its body: the key, the hash, the objects, the LRU's
link (measured: ~230 bytes on CPython 3.11)."""


@dataclass(slots=True)
class MessageCache:
    """LRU of redacted messages keyed by the raw message's hash, bounded in bytes: each
    entry counts its body plus `ENTRY_BYTES`.

    Agents resend their whole history every turn; without this the writer would redact
    the same messages again on every request. For a store that keeps bodies by reference
    the entries have none (`StoredMessage.without_body`): a hash and a flag for each
    message instead of its redacted JSON.
    """

    max_bytes: int
    size: int = 0
    items: OrderedDict[bytes, StoredMessage] = field(default_factory=OrderedDict)

    def get(self, key: bytes) -> StoredMessage | None:
        hit = self.items.get(key)
        if hit is not None:
            self.items.move_to_end(key)
        return hit

    def put(self, key: bytes, value: StoredMessage) -> None:
        if self.cost(value) > self.max_bytes // 4:
            return
        old = self.items.get(key)
        if old is not None:
            self.size -= self.cost(old)
        self.items[key] = value
        self.size += self.cost(value)
        while self.size > self.max_bytes:
            _, old = self.items.popitem(last=False)
            self.size -= self.cost(old)

    def cost(self, message: StoredMessage) -> int:
        return ENTRY_BYTES + len(message.data or b"")


def message_digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def raw_digest(value: object) -> bytes:
    """The cache key of a message (or tools list) as the client sent it."""
    return message_digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
