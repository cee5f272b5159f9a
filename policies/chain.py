"""Chain: runs curators in order and reports what each one did.

`run` is plain synchronous code, for chains of plain curators. A chain holding an
`AsyncCurator` (the summarizer) must be run with `arun`; `run` refuses it up front rather
than half-curate a request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from policies import invariants
from policies.base import (
    Action,
    AsyncCurator,
    AsyncOnlyError,
    CurationContext,
    Curator,
    CuratorOutput,
    TextCutter,
)
from policies.messages import Message
from policies.tokens import REPLY_PRIMING


@dataclass(frozen=True, slots=True)
class CurationResult:
    messages: list[Message]
    actions: tuple[Action, ...]
    tokens_before: int
    tokens_after: int
    keys: tuple[bytes | None, ...] = ()
    """Each input message's digest (the token counter's, of the whole message), in order:
    a caller that caches per message (the audit log) need not hash them again."""
    counts: tuple[int, ...] = ()
    """Each input message's tokens, in order (`tokens_before` is their sum plus the reply
    priming): a caller that prices the uncurated prompt need not count them again."""
    tools_tokens: int = 0
    """Tokens of the request's tool definitions, as the budget counted them (0 without a
    budget: a policy with no curators makes none): with `tokens_after`, the prompt the
    upstream was sent, for the calibration."""

    @property
    def changed(self) -> bool:
        return bool(self.actions)


@dataclass(slots=True)
class _Progress:
    """One run's state: the current list and the actions so far."""

    ctx: CurationContext
    check: bool
    counts: tuple[int, ...]
    current: list[Message]
    keys: tuple[bytes | None, ...]
    actions: list[Action] = field(default_factory=list)

    @property
    def before(self) -> int:
        return sum(self.counts) + REPLY_PRIMING

    def apply(self, name: str, out: CuratorOutput) -> None:
        if self.check:
            invariants.assert_ok(self.current, out.messages, self.ctx, name)
        if out.actions:
            self.actions.extend(out.actions)
            self.current = out.messages

    def result(self) -> CurationResult:
        ctx = self.ctx
        # Curators counted what they wrote, so this only adds up counts already known.
        before = self.before
        after = ctx.count_total(self.current) if self.actions else before
        actions = tuple(self.actions)
        tools = ctx.tools_tokens
        return CurationResult(self.current, actions, before, after, self.keys, self.counts, tools)


def _start(messages: Sequence[Message], ctx: CurationContext, check: bool) -> _Progress:
    counts = tuple(ctx.count_each(messages))
    return _Progress(ctx, check, counts, list(messages), ctx.keys(messages))


@dataclass(frozen=True, slots=True)
class Chain:
    """An ordered tuple of curators, built once at load time."""

    curators: tuple[Curator, ...] = ()
    _awaited: tuple[bool, ...] = field(init=False, repr=False, compare=False)
    """Per curator: is it an AsyncCurator (decided once, not per request)."""
    _profile_chars: int | None = field(init=False, repr=False, compare=False)
    """The fewest tokens a curator may cut a text to (`TextCutter`), taken as the fewest
    characters of a text worth profiling; None when no curator cuts texts."""

    def __post_init__(self) -> None:
        awaited = tuple(isinstance(c, AsyncCurator) for c in self.curators)
        object.__setattr__(self, "_awaited", awaited)
        cuts = [c.cuts_above() for c in self.curators if isinstance(c, TextCutter)]
        object.__setattr__(self, "_profile_chars", min(cuts, default=None))

    @property
    def profile_chars(self) -> int | None:
        """What a context this chain runs in should profile (`CurationContext.profile_chars`)."""
        return self._profile_chars

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.curators)

    @property
    def is_async(self) -> bool:
        """True when some curator awaits I/O, so only `arun` can run this chain."""
        return any(self._awaited)

    def run(
        self, messages: Sequence[Message], ctx: CurationContext, *, check: bool = False
    ) -> CurationResult:
        """Curate `messages`. With `check`, assert the invariants after every curator.

        Raises `AsyncOnlyError` when the chain holds an async curator.
        """
        if self.is_async:
            names = [c.name for c, a in zip(self.curators, self._awaited, strict=True) if a]
            raise AsyncOnlyError(names)
        ctx = self._fitted(ctx)
        progress = _start(messages, ctx, check)
        for curator in self.curators:
            progress.apply(curator.name, curator.curate(progress.current, ctx))
        return progress.result()

    def _fitted(self, ctx: CurationContext) -> CurationContext:
        """`ctx`, or a copy that profiles what this chain's curators may cut."""
        if ctx.profile_chars == self._profile_chars:
            return ctx
        return dataclasses.replace(ctx, profile_chars=self._profile_chars)

    async def arun(
        self, messages: Sequence[Message], ctx: CurationContext, *, check: bool = False
    ) -> CurationResult:
        """Like `run`, awaiting async curators; plain curators run inline, in order."""
        ctx = self._fitted(ctx)
        progress = _start(messages, ctx, check)
        for curator, awaited in zip(self.curators, self._awaited, strict=True):
            if awaited and isinstance(curator, AsyncCurator):
                out = await curator.acurate(progress.current, ctx)
            else:
                out = curator.curate(progress.current, ctx)
            progress.apply(curator.name, out)
        return progress.result()
