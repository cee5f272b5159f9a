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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from policies.messages import Message, role

if TYPE_CHECKING:
    from policies.tokens import TokenCounter

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
    """Per-request facts a curator may use. Built once per request by the policy."""

    model: str
    counter: TokenCounter
    budget: int
    """Tokens the messages may use: window - output reserve - tool definitions - priming."""
    pins: PinSpec = field(default_factory=PinSpec)
    on_overflow: Literal["truncate", "reject", "forward"] = "truncate"

    def pinned(self, messages: Sequence[Message]) -> frozenset[int]:
        return self.pins.pinned(messages)


class Curator(Protocol):
    """A step of the chain. See the module docstring for the contract."""

    name: ClassVar[str]

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput: ...
