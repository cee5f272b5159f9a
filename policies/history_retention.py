"""history_retention: what happens to big user and tool contents once they are old.

A content over `threshold_chars` (text, plus image URLs and other part data) in a message
older than the newest `keep_recent_turns` turns is, per role:
- `full`: kept as is;
- `summary`: replaced by a description of what it was, e.g.
  `[table: 120 rows, ~18 KB; omitted from history by context-curator]` (see
  `policies.describe`: json, table, log, code, base64, binary, image data URL, text);
- `drop`: removed. A tool or function result cannot go without orphaning its call, so its
  content becomes `[tool result removed: ~18 KB]`. A user message goes entirely only when
  the next message is also a user message, so the turn still opens with the user's words
  and no assistant reply is left answering nothing; otherwise its content becomes
  `[user message removed: ~18 KB]`.
`user` sets the mode for user messages, `tool` for tool and function results. Pinned
messages are never touched, nor is the last unit (with `keep_recent_turns: 0` every other
message is older). Placeholders are far shorter than the smallest threshold, so curating
again changes nothing.

With `min_fill` (`policies.fill`), rewrites go oldest first, and one that would take the
prompt below that share of the budget is not made.

Prefix caching. A message is rewritten the turn it stops being recent, and from then on to
the same bytes every turn (a placeholder depends only on that content), so the cache
breaks at most at that message, once per user turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from policies import fill, params
from policies.base import Action, ActionKind, CurationContext, CuratorOutput
from policies.describe import content_bytes, content_chars, describe, size_label
from policies.errors import ParamError
from policies.messages import Message, is_result, role, turn_starts, units

Mode = Literal["full", "summary", "drop"]
MODES: tuple[Mode, ...] = ("full", "summary", "drop")
MIN_THRESHOLD_CHARS = 256
"""Above the longest placeholder, so a placeholder is never itself over the threshold."""
SUMMARY_SUFFIX = "; omitted from history by context-curator]"


def summary(content: object) -> str:
    """The description that replaces a content in `summary` mode."""
    return f"[{describe(content)}{SUMMARY_SUFFIX}"


def removed(what: str, content: object) -> str:
    """The minimal placeholder `drop` leaves where a message cannot go entirely."""
    return f"[{what} removed: ~{size_label(content_bytes(content))}]"


def _mode(field: str, value: object) -> Mode:
    for mode in MODES:
        if value == mode:
            return mode
    raise ParamError(field, f"must be one of {', '.join(MODES)}, got {value!r}")


@dataclass(frozen=True, slots=True)
class HistoryRetention:
    """Keeps, describes or removes big user and tool contents in older turns."""

    name: ClassVar[str] = "history_retention"

    threshold_chars: int = 10_000
    keep_recent_turns: int = 2
    user: Mode = "summary"
    tool: Mode = "summary"
    min_fill: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))
        params.integer("threshold_chars", self.threshold_chars, minimum=MIN_THRESHOLD_CHARS)
        params.integer("keep_recent_turns", self.keep_recent_turns, minimum=0)
        object.__setattr__(self, "user", _mode("user", self.user))
        object.__setattr__(self, "tool", _mode("tool", self.tool))

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        if not messages:
            return CuratorOutput([])
        pinned = ctx.pinned(messages)
        old = self._old_before(messages)
        out: list[Message] = []
        actions: list[Action] = []
        floor = fill.floor(messages, ctx, self.min_fill)
        for i, msg in enumerate(messages):
            mode = self._mode_for(msg)
            if mode == "full" or i >= old or i in pinned:
                out.append(msg)
                continue
            if content_chars(msg.get("content")) <= self.threshold_chars or (
                floor.lowest and fill.cut_to_fit(msg)
            ):
                out.append(msg)
                continue
            new, kind, done = self._apply(messages, i, mode, ctx)
            action = self._action(msg, new, kind, done, i, ctx)
            if not floor.allows(action.tokens_removed):
                out.append(msg)
                continue
            actions.append(action)
            if new is not None:
                out.append(new)
        return CuratorOutput(out if actions else list(messages), tuple(actions))

    def _action(
        self,
        msg: Message,
        new: Message | None,
        kind: ActionKind,
        done: str,
        i: int,
        ctx: CurationContext,
    ) -> Action:
        before = ctx.count(msg)
        after = ctx.count(new) if new is not None else 0
        size = size_label(content_bytes(msg.get("content")))
        reason = f"{role(msg)} content of ~{size} in an older turn {done}"
        return Action(self.name, kind, (i,), before - after, reason)

    def _old_before(self, messages: Sequence[Message]) -> int:
        if self.keep_recent_turns == 0:
            return units(messages)[-1].start
        starts = turn_starts(messages)
        return starts[-self.keep_recent_turns] if len(starts) > self.keep_recent_turns else 0

    def _mode_for(self, msg: Message) -> Mode:
        if role(msg) == "user":
            return self.user
        return self.tool if is_result(msg) else "full"

    def _apply(
        self, messages: Sequence[Message], i: int, mode: Mode, ctx: CurationContext
    ) -> tuple[Message | None, ActionKind, str]:
        """The new message (None: removed), the kind of action, and what was done."""
        msg = messages[i]
        content = msg.get("content")
        if mode == "summary":
            # Describing reads the whole content, and old messages are resent every turn.
            text = ctx.recall_text(msg, b"|history_summary", lambda: summary(content))
            return ctx.with_content(msg, text), "replace", "replaced by a description"
        placeholder = "replaced by a placeholder"
        if role(msg) != "user":
            return ctx.with_content(msg, removed("tool result", content)), "replace", placeholder
        if i + 1 < len(messages) and role(messages[i + 1]) == "user":
            return None, "drop", "removed"
        return ctx.with_content(msg, removed("user message", content)), "replace", placeholder
