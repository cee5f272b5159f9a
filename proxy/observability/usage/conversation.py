"""Which conversation a request belongs to: the client's session header, else a digest.

Agents resend their whole history every turn, so the pinned prefix (the leading system and
developer messages) and the first user message are the same on every turn of one
conversation, and differ between conversations. A client that knows better says so with
`x-session-id`.
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
    if session:
        session = session.strip()
        if session and len(session) <= MAX_SESSION_CHARS and session.isprintable():
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


def _digest(value: object) -> str:
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()
