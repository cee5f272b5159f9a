"""turn_masking: an agent's old steps are masked in large, anchored steps, so the prompt stays
small and its cached prefix stays byte-identical for many turns.

An agent resends its whole history every turn, and a provider bills the part it has cached
at about a tenth of the price: on real coding-agent runs four fifths of what the whole
history costs is these cached re-reads, and half of those tokens are the agent's own
messages (its reasoning, its commands, whole files it wrote in a heredoc). Masking only old
tool results cannot go much below that; this curator masks the agent's old steps whole:

- the newest `keep_turns` agent steps (an assistant message and the results that answer
  it) stay whole (fewer on a small window, where they would use more than `keep_share` of
  the budget: never fewer than the newest one), and so does every user message, every
  pinned message and the last unit: the agent's newest turn and its task are never touched;
- an older step is masked: each text longer than `keep_chars` characters (the assistant's
  text, each string argument of its tool calls, each tool result) keeps its first
  `keep_chars` characters and a marker saying how much was masked. The calls keep their
  names and valid JSON arguments, so the agent still sees what it did, and can run a call
  again for output it needs;
- lines the agent's kept steps still work with are kept: a masked tool result keeps (after
  its head) each of its lines that contains a path, an identifier or a quoted string named
  by the agent's next `keep_turns` steps after it, up to `keep_lines` lines. Those steps
  are history by the time the result is masked, so what a masked result says never changes.

Cache stability. Nothing is masked while the prompt is at most `trigger_tokens`. Past it,
the maskable steps are grouped into chunks from the start of the conversation, each ending
at the first step where its savings reach `step_tokens`, and only whole chunks are masked
(as `tool_use_clearing` clears). A masked step is the same bytes on every later turn, the
masked region grows a whole chunk at a time, and the provider's cache breaks once per chunk
at the first newly masked step: a cut is made only when it saves at least `step_tokens` on
every later turn, which pays for the tail it re-bills within a few turns.

Curating again changes nothing: a masked text carries the marker and is not masked again,
and what is left never completes a chunk. With `min_fill` (`policies.fill`) chunks stop
before the prompt would fall below that share of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

import orjson

from policies import fill, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.masking_cut import MARK, Masker
from policies.masking_refs import kept_lines, message_names
from policies.messages import Message, Unit, role, units

__all__ = ["MARK", "TurnMasking"]


@dataclass(slots=True)
class _Step:
    """One old agent step that may be masked, and what masking it would change."""

    unit: Unit
    replaced: dict[int, Message] = field(default_factory=dict)
    saved: int = 0


@dataclass(frozen=True, slots=True)
class TurnMasking:
    """Masks agent steps older than the newest `keep_turns`, whole chunks at a time."""

    name: ClassVar[str] = "turn_masking"

    keep_turns: int = 8
    trigger_tokens: int = 16_000
    trigger_share: float = 0.0
    step_tokens: int = 8_000
    keep_chars: int = 160
    min_chars: int = 600
    keep_lines: int = 12
    keep_share: float = 0.5
    keep_names: int = 40
    min_fill: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))
        params.integer("keep_turns", self.keep_turns, minimum=1)
        params.integer("trigger_tokens", self.trigger_tokens, minimum=0)
        share = params.ratio("trigger_share", self.trigger_share, allow_zero=True)
        object.__setattr__(self, "trigger_share", share)
        params.integer("step_tokens", self.step_tokens, minimum=1)
        params.integer("keep_chars", self.keep_chars, minimum=0)
        params.integer("min_chars", self.min_chars, minimum=0)
        params.integer("keep_lines", self.keep_lines, minimum=0)
        share = params.ratio("keep_share", self.keep_share, allow_zero=True)
        object.__setattr__(self, "keep_share", share)
        params.integer("keep_names", self.keep_names, minimum=0)

    def trigger(self, ctx: CurationContext) -> int:
        """`trigger_tokens`, or `trigger_share` of the budget when that is lower."""
        share = int(self.trigger_share * ctx.budget) if self.trigger_share else self.trigger_tokens
        return min(self.trigger_tokens, share)

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        total = ctx.count_total(messages) if messages else 0
        trigger = self.trigger(ctx)
        if total <= trigger:
            return CuratorOutput(list(messages))
        masker = Masker(self.keep_chars, self.min_chars, self.keep_names)
        steps = self._maskable(messages, masker, ctx)
        # Masking stops at `min_fill` of the budget, or at the trigger when that is lower:
        # a window up to the trigger's size is filled, a larger one is masked for cost.
        floor = fill.floor(messages, ctx, self.min_fill, cap=self.trigger_tokens)
        chosen: dict[int, _Step] = {}  # by the unit's first message
        for chunk in self._chunks(steps):
            if not floor.allows(_saved(chunk)):
                break
            chosen.update((s.unit.start, s) for s in chunk)
        left = total - _saved(chosen.values())
        if left > ctx.budget:  # still over: mask the oldest steps deeper rather than drop them
            self._deepen(messages, chosen, left, ctx)
        done = [s for s in chosen.values() if s.replaced]
        left = total - _saved(done)
        if not done:
            return CuratorOutput(list(messages))
        out = list(messages)
        for step in done:
            for i, msg in step.replaced.items():
                out[i] = msg
        indexes = tuple(sorted(i for s in done for i in s.replaced))
        reason = (
            f"masked {len(done)} agent step(s) older than the newest {self.keep_turns}: the "
            f"conversation has {total:,} tokens, over the trigger of {trigger:,}"
        )
        return CuratorOutput(out, (Action(self.name, "replace", indexes, total - left, reason),))

    def _deepen(
        self, messages: Sequence[Message], chosen: dict[int, _Step], left: int, ctx: CurationContext
    ) -> None:
        """Mask whole chunks of the oldest steps deeper (every text past `keep_chars`) until
        the prompt fits, never below `min_fill` of the budget (token_budget fits the rest)."""
        lowest = self.min_fill * ctx.budget
        deep = Masker(self.keep_chars, 0, self.keep_names)
        for chunk in self._chunks(self._maskable(messages, deep, ctx)):
            if left <= ctx.budget:
                return
            gain = sum(
                s.saved - chosen[s.unit.start].saved if s.unit.start in chosen else s.saved
                for s in chunk
            )
            if left - gain < lowest:
                return
            left -= gain
            chosen.update((s.unit.start, s) for s in chunk)

    def _chunks(self, steps: Iterable[_Step]) -> Iterator[list[_Step]]:
        """The whole chunks of `steps`, from the start: each ends at the first step where its
        savings reach `step_tokens` (a later step never moves an earlier chunk's end).
        Lazy: a caller that stops early never plans the later steps."""
        chunk: list[_Step] = []
        for step in steps:
            chunk.append(step)
            if _saved(chunk) >= self.step_tokens:
                yield chunk
                chunk = []

    def _maskable(
        self, messages: Sequence[Message], masker: Masker, ctx: CurationContext
    ) -> Iterator[_Step]:
        """Agent steps older than the newest `keep_turns`, oldest first, with their savings
        (planned as they are asked for)."""
        found = units(messages)
        agent = [k for k, u in enumerate(found) if role(messages[u.start]) == "assistant"]
        keep = self._kept(messages, [found[k].start for k in agent], ctx)
        if len(agent) <= keep:
            return
        pinned = ctx.pinned(messages)
        last = len(found) - 1
        heads = [messages[found[k].start] for k in agent]
        keys = ctx.keys(heads)
        for n, k in enumerate(agent[:-keep]):
            unit = found[k]
            if k == last or not pinned.isdisjoint(unit.indexes()):
                continue
            later = range(n + 1, min(n + 1 + self.keep_turns, len(heads)))
            tag = b"".join(keys[j] or b"?" for j in later)
            refs = _Refs(partial(self._wanted, heads, later, ctx), tag)
            yield self._plan(messages, unit, masker, refs, ctx)

    def _kept(
        self, messages: Sequence[Message], starts: Sequence[int], ctx: CurationContext
    ) -> int:
        """How many of the newest agent steps stay whole: `keep_turns`, fewer when those
        would use more than `keep_share` of the budget, never fewer than one."""
        keep = min(self.keep_turns, len(starts))
        if keep <= 1 or not self.keep_share:
            return max(keep, 1)
        each = ctx.count_each(messages)
        room = self.keep_share * ctx.budget
        while keep > 1 and sum(each[starts[-keep] :]) > room:
            keep -= 1
        return keep

    def _wanted(
        self, heads: Sequence[Message], later: range, ctx: CurationContext
    ) -> frozenset[str]:
        """The names the agent's steps in `later` use."""
        out: set[str] = set()
        for j in later:
            head = heads[j]
            found = ctx.recall_text(head, b"|tm-names", partial(_names_of, head))
            out.update(found.split("\n") if found else ())
        return frozenset(out)

    def _plan(
        self,
        messages: Sequence[Message],
        unit: Unit,
        masker: Masker,
        refs: _Refs,
        ctx: CurationContext,
    ) -> _Step:
        step = _Step(unit)
        params = f"|tm|{masker.keep_chars}|{masker.min_chars}|{masker.keep_names}|{self.keep_lines}"
        for i in unit.indexes():
            msg = messages[i]
            if role(msg) == "assistant":
                tag = params.encode() + b"|a"
                made = ctx.recall_text(msg, tag, partial(_dumped, masker, msg))
                new: Message | None = orjson.loads(made) if made else None
            else:
                new = self._result(msg, masker, refs, params.encode(), ctx)
            if new is None:
                continue
            saved = ctx.count(msg) - ctx.count(new)
            if saved > 0:
                step.replaced[i] = new
                step.saved += saved
        return step

    def _result(
        self, msg: Message, masker: Masker, refs: _Refs, params: bytes, ctx: CurationContext
    ) -> Message | None:
        content = msg.get("content")
        if not isinstance(content, str):
            return None

        def made() -> str:
            cut = masker.text(content)
            if cut is None:
                return ""
            lines = kept_lines(content[self.keep_chars :], refs.names(), self.keep_lines)
            return f"{cut}\nlines the agent used next:\n{lines}" if lines else cut

        tag = params + b"|r|" + (refs.tag if self.keep_lines else b"")
        text = ctx.recall_text(msg, tag, made)
        if not text:
            return None
        tokens = ctx.recall(msg, tag + b"|n", lambda: (ctx.count_text(text),))[0]
        return ctx.with_content(msg, text, tokens)


class _Refs:
    """The names a step's next steps use, worked out only when a result needs them."""

    __slots__ = ("_compute", "_found", "tag")

    def __init__(self, compute: Callable[[], frozenset[str]], tag: bytes) -> None:
        self._compute = compute
        self._found: frozenset[str] | None = None
        self.tag = tag

    def names(self) -> frozenset[str]:
        if self._found is None:
            self._found = self._compute()
        return self._found


def _saved(steps: Iterable[_Step]) -> int:
    return sum(s.saved for s in steps)


def _names_of(head: Message) -> str:
    return "\n".join(sorted(message_names(head)))


def _dumped(masker: Masker, msg: Message) -> str:
    """`msg` masked, as JSON (what is remembered across requests), or "" when unchanged."""
    new = masker.assistant(msg)
    return orjson.dumps(new).decode() if new is not None else ""
