"""The curator contract, and the context every curator is handed.

Contract (every curator, checked by `invariants.check` in the tests):

1. Never mutate the input. Return new lists; a changed message is a new dict
   (`{**msg, "content": cut}`), an unchanged one may be the same object.
2. Deterministic and stateless: the output is a function of the input messages, the
   context and the curator's own (frozen) parameters. Any replica computes the same.
3. Keep pinned messages verbatim and in place (`CurationContext.pinned`).
4. Keep the last unit, so the model still sees what it must answer.
5. Keep relative order. Drop whole units only, so tool-call pairs stay valid; shorten
   only string contents (prefix/suffix cuts, or a placeholder naming what was removed).
6. Idempotent: curating an already curated list changes nothing.
7. Report every change as an `Action`. A curator that changes nothing returns no action.

Parameters are dataclass fields, validated in `__post_init__` (raise `ValueError` naming
the field); the loader turns those errors into `file:line: key.path: problem`.

A curator that must await I/O (the summarizer calls a model) is an `AsyncCurator`: the
chain awaits its `acurate`, and only `Chain.arun` / `Policy.acurate` can run it. Its I/O
goes through the callables in `CurationContext.services` (`policies.summary_io`), never
through an import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol, runtime_checkable

from policies.messages import Content, Message, role
from policies.splits import PROFILE_MIN_CHARS
from policies.summary_io import Services
from policies.tally import Tally
from policies.tokens import Plan, TokenCounter

ActionKind = Literal["drop", "truncate", "repair", "replace", "summarize"]


@dataclass(frozen=True, slots=True)
class Action:
    """One thing a curator did: which input messages, how many tokens it removed, why."""

    curator: str
    kind: ActionKind
    indexes: tuple[int, ...]
    tokens_removed: int
    reason: str


@dataclass(frozen=True, slots=True)
class CuratorOutput:
    messages: list[Message]
    actions: tuple[Action, ...] = ()


@dataclass(frozen=True, slots=True)
class PinSpec:
    """Which messages are pinned: these roles, plus the first user message if asked."""

    roles: frozenset[str] = frozenset({"system", "developer"})
    first_user: bool = False

    def pinned(self, messages: Sequence[Message]) -> frozenset[int]:
        pins = {i for i, m in enumerate(messages) if role(m) in self.roles}
        if self.first_user:
            first = next((i for i, m in enumerate(messages) if role(m) == "user"), None)
            if first is not None:
                pins.add(first)
        return frozenset(pins)


@dataclass(frozen=True, slots=True)
class CurationContext:
    """Per-request facts a curator may use, and how it counts. Built once per request.

    Count through the context (`count`, `count_text`, ...), never through `counter`: it
    counts each message of the request once and answers repeats from memory, so build a
    new context for each request and never mutate a message it has counted.
    """

    model: str
    counter: TokenCounter
    budget: int
    """Tokens the messages may use: window - output reserve - tool definitions - priming."""
    pins: PinSpec = field(default_factory=PinSpec)
    on_overflow: Literal["truncate", "reject", "forward"] = "truncate"
    services: Services | None = None
    """Needed by async curators only; None where no model may be called."""
    profile_chars: int | None = PROFILE_MIN_CHARS
    """Texts at least this long are counted so that cutting them is cheap (`TextCutter`);
    None: no text is. The chain sets it from its curators."""
    _tally: Tally = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tally", Tally(self.counter, self.model, self.profile_chars))

    def pinned(self, messages: Sequence[Message]) -> frozenset[int]:
        return self.pins.pinned(messages)

    # -- counting: every curator ------------------------------------------------------
    def count(self, msg: Message) -> int:
        """Tokens of one message, its per-message overhead included."""
        return self._tally.one(msg)

    def count_each(self, messages: Sequence[Message]) -> list[int]:
        """`count` of each message."""
        return self._tally.each(messages)

    def count_total(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of these messages, reply priming included."""
        return self._tally.total(messages)

    def count_text(self, text: str) -> int:
        return self._tally.text(text)

    def count_bare(self, msg: Message) -> int:
        """Tokens of `msg` with an empty content: all it costs but its content."""
        return self._tally.bare(msg)

    # -- rewriting a message --------------------------------------------------------------
    def with_content(
        self, msg: Message, content: Content, tokens: int | None = None, *, tag: bytes = b""
    ) -> Message:
        """`msg` with this content, counted as `count_bare(msg)` plus the content's
        `tokens` when given (a cutter knows them), else counted here. A `tag` (see
        `recall`) says the content was made from `msg`'s alone by the rule it names, so
        what is recalled about the new message is remembered across requests too."""
        return self._tally.replaced(msg, content, tokens, tag)

    def recall(self, msg: Message, tag: bytes, compute: Callable[[], Plan]) -> Plan:
        """`compute()`: numbers a curator derives from `msg` alone, remembered with the
        message across requests (a history is resent every turn). `tag` names the
        curator and each parameter the numbers depend on."""
        return self._tally.remember(msg, tag, compute)

    def recall_text(self, msg: Message, tag: bytes, compute: Callable[[], str]) -> str:
        """`recall`, for a text derived from `msg` alone (a description of it)."""
        return self._tally.remember_text(msg, tag, compute)

    def tool_names(self, msg: Message) -> Mapping[str, str]:
        """`messages.tool_names(msg)`: call id -> function name of an assistant's calls."""
        return self._tally.tool_names(msg)

    def content_bytes(self, content: object) -> int:
        """`describe.content_bytes(content)`: the UTF-8 size of a content's text."""
        return self._tally.content_bytes(content)

    # -- cutting a text: curators that shorten contents -------------------------------
    def fit_head(self, text: str, max_tokens: int) -> int:
        """Characters of the longest start of `text` within `max_tokens` tokens."""
        return self._tally.fit(text, max_tokens, from_end=False)

    def fit_tail(self, text: str, max_tokens: int) -> int:
        """Characters of the longest end of `text` within `max_tokens` tokens."""
        return self._tally.fit(text, max_tokens, from_end=True)

    def count_span(self, text: str, start: int, stop: int) -> int:
        """Tokens of `text[start:stop]`."""
        return self._tally.span(text, start, stop)

    def count_joined(self, text: str, head: int, middle: str, tail: int) -> int:
        """Tokens of `text[:head] + middle + text[len(text) - tail:]`."""
        return self._tally.joined(text, head, middle, tail)


class Curator(Protocol):
    """A step of the chain. See the module docstring for the contract."""

    name: ClassVar[str]

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput: ...


@runtime_checkable
class TextCutter(Protocol):
    """A curator that cuts long texts to a number of tokens (a head and a tail, say).

    The chain counts texts that may be cut so that cutting them later re-encodes only
    near the cut (`policies.splits`); that costs a little on every long text, so it is
    done only for texts of at least `cuts_above()` characters (a text of fewer
    characters rarely holds more tokens).
    """

    def cuts_above(self) -> int:
        """Texts of more tokens than this may be cut."""
        ...


@runtime_checkable
class AsyncCurator(Curator, Protocol):
    """A curator that awaits I/O; the chain calls `acurate` instead of `curate`."""

    async def acurate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        """Same contract as `curate`; failures of its I/O must not raise (fail open)."""
        ...


class AsyncOnlyError(TypeError):
    """An async curator was run synchronously (`Chain.run` / `Policy.curate`)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        super().__init__(
            f"curator(s) {', '.join(self.names)} await I/O and need the async API: "
            "use Chain.arun or Policy.acurate instead of Chain.run or Policy.curate"
        )
