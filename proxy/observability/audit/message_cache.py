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
    """A redacted message as stored: canonical JSON bytes and their hash."""

    digest: bytes
    data: bytes
    redacted: bool = field(init=False)
    """Whether redaction took something out (looked for once: a cached message is
    asked again on every request that resends it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "redacted", REDACTED_MARK in self.data)


@dataclass(slots=True)
class MessageCache:
    """LRU of redacted messages keyed by the raw message's hash, bounded in bytes.

    Agents resend their whole history every turn; without this the writer would redact
    the same messages again on every request.
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
        if len(value.data) > self.max_bytes // 4:
            return
        old = self.items.get(key)
        if old is not None:
            self.size -= len(old.data)
        self.items[key] = value
        self.size += len(value.data)
        while self.size > self.max_bytes:
            _, old = self.items.popitem(last=False)
            self.size -= len(old.data)


def message_digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def raw_digest(value: object) -> bytes:
    """The cache key of a message (or tools list) as the client sent it."""
    return message_digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
