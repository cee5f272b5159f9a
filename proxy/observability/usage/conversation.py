"""Which conversation a request belongs to: the client's session header, else a digest.

Agents resend their whole history every turn, so the pinned prefix (the leading system and
developer messages) and the first user message are the same on every turn of one
conversation, and differ between conversations. A client that knows better says so with
`x-session-id`.

Two keys, for two places: `conversation_key` groups the proxy's own live history (it sees the
messages before redaction), `stored_key` names a conversation in the audit store (after
redaction, as the viewer reads it back).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

SESSION_HEADER = "x-session-id"
MAX_SESSION_CHARS = 128
"""A longer (or non-printable) session id is kept as its digest: it becomes a map key,
an audit field and a command-line argument."""
_PINNED_ROLES = frozenset({"system", "developer"})


def conversation_key(session: str | None, messages: Sequence[Any]) -> str:
    """`session` when the client sent a usable one, else `c-` + 16 hex digits of a digest of
    the pinned prefix and the first user message."""
    session = session.strip() if session else None
    if session:  # a blank one is none: it would pool every such client's conversations
        if len(session) <= MAX_SESSION_CHARS and session.isprintable():
            return session
        return "s-" + _digest([session])
    head: list[Any] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role in _PINNED_ROLES:
            head.append(message)
            continue
        if role == "user":
            head.append(message)
            break
    return "c-" + _digest(head)


def stored_key(digests: Sequence[bytes], roles: Sequence[object]) -> str:
    """The key the audit viewer derives from a stored record (`readers.query.
    conversation_key`): 16 hex digits over the content addresses of its messages up to and
    including the first user message. The audit record's `conversation` is this one unless
    the client sent `x-session-id`, so the viewer and the CLI agree (a test checks it)."""
    h = hashlib.blake2b(digest_size=8)
    for digest, role in zip(digests, roles, strict=False):
        h.update(digest)
        if role == "user":
            break
    return h.hexdigest()


def _digest(value: object) -> str:
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()
