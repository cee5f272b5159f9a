"""Chain: runs curators in order and reports what each one did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies import invariants
from policies.base import Action, CurationContext, Curator
from policies.messages import Message


@dataclass(frozen=True, slots=True)
class CurationResult:
    messages: list[Message]
    actions: tuple[Action, ...]
    tokens_before: int
    tokens_after: int

    @property
    def changed(self) -> bool:
        return bool(self.actions)


@dataclass(frozen=True, slots=True)
class Chain:
    """An ordered tuple of curators, built once at load time."""

    curators: tuple[Curator, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.curators)

    def run(
        self, messages: Sequence[Message], ctx: CurationContext, *, check: bool = False
    ) -> CurationResult:
        """Curate `messages`. With `check`, assert the invariants after every curator."""
        model, counter = ctx.model, ctx.counter
        before = counter.count_messages(messages, model)
        current: list[Message] = list(messages)
        actions: list[Action] = []
        for curator in self.curators:
            out = curator.curate(current, ctx)
            if check:
                invariants.assert_ok(current, out.messages, ctx, curator.name)
            if out.actions:
                actions.extend(out.actions)
                current = out.messages
        after = counter.count_messages(current, model) if actions else before
        return CurationResult(current, tuple(actions), before, after)
