"""How `turn_masking` masks one old message: a head, a marker, and the names it held.

A masked text keeps its first `keep_chars` characters and says how much went and which
code-like names (`policies.masking_refs`) were in it, so the agent still knows what it
saw and can ask again. Calls keep their ids, names and valid JSON arguments: each long
string argument is masked the same way. A text that already carries the marker is left
alone, so masking twice changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.describe import size_label
from policies.masking_refs import names_in
from policies.messages import Message

MARK = " [masked "


def marker(n_bytes: int, names: str = "") -> str:
    """What a masked text says after its head: how much was masked, and the names in it."""
    return f"{MARK}{size_label(n_bytes)} of an old step{'; names: ' + names if names else ''}]"


@dataclass(frozen=True, slots=True)
class Masker:
    """Masks texts longer than `min_chars` to `keep_chars` and a marker with `keep_names`."""

    keep_chars: int
    min_chars: int
    keep_names: int

    def text(self, text: str) -> str | None:
        """`text` masked, or None when it is short or masked already."""
        if len(text) <= max(self.min_chars, self.keep_chars + 40) or MARK in text:
            return None
        head, rest = text[: self.keep_chars], text[self.keep_chars :]
        found = names_in(rest, exclude=head, limit=self.keep_names) if self.keep_names else ""
        return head + marker(len(rest.encode("utf-8", "surrogatepass")), found)

    def assistant(self, msg: Message) -> Message | None:
        """An assistant message with its long text and long arguments masked, or None."""
        out: dict[str, Any] = dict(msg)
        changed = False
        content = msg.get("content")
        if isinstance(content, str) and (cut := self.text(content)) is not None:
            out["content"], changed = cut, True
        calls = msg.get("tool_calls")
        if isinstance(calls, list):
            new_calls = [self._call(c) for c in calls]
            if any(a is not b for a, b in zip(new_calls, calls, strict=True)):
                out["tool_calls"], changed = new_calls, True
        return out if changed else None

    def _call(self, call: Any) -> Any:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            return call
        args = fn.get("arguments")
        if not isinstance(args, str) or len(args) <= self.min_chars or MARK in args:
            return call
        try:
            value = json.loads(args)
        except ValueError:
            cut = self.text(args)
            return call if cut is None else {**call, "function": {**fn, "arguments": cut}}
        if not isinstance(value, dict):
            return call
        new = {k: (self.text(v) or v) if isinstance(v, str) else v for k, v in value.items()}
        if new == value:
            return call
        return {**call, "function": {**fn, "arguments": json.dumps(new, ensure_ascii=False)}}
