"""Texts of an audit record besides its messages, as the audit stores them: the curators'
actions and an error response's body."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from policies.base import Action
from proxy.observability.audit.capture import BodyCapture

ERROR_TEXT_LIMIT = 64 * 1024
Clean = Callable[[object], Any]
"""Redaction, or masking when redaction failed."""


def actions_of(actions: Sequence[Action], clean: Clean) -> list[dict[str, Any]]:
    """The actions as the audit shows them, their strings redacted (a reason may quote a
    tool name the client chose), not their indexes (thousands, in a long history); each
    distinct string once (the actions of one turn repeat a few reasons)."""
    done: dict[str, Any] = {}

    def text(value: str) -> Any:
        if value not in done:
            done[value] = clean(value)
        return done[value]

    return [
        {
            "curator": text(a.curator),
            "kind": text(a.kind),
            "indexes": list(a.indexes),
            "tokens_removed": a.tokens_removed,
            "reason": text(a.reason),
        }
        for a in actions
    ]


def error_body(body: BodyCapture | bytes | str) -> Any:
    if isinstance(body, str):
        return body[:ERROR_TEXT_LIMIT]
    data = body.data() if isinstance(body, BodyCapture) else body
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[:ERROR_TEXT_LIMIT].decode("utf-8", "replace")
