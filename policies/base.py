"""The curator contract. The context every curator is handed, and counts through, is
`policies.context.CurationContext` (re-exported here with `PinSpec`).

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
the field; `policies.params` does); the loader turns those errors into
`file:line: key.path: problem`.

A curator that must await I/O (the summarizer calls a model) is an `AsyncCurator`: the
chain awaits its `acurate`, and only `Chain.arun` / `Policy.acurate` can run it. Its I/O
goes through the callables in `CurationContext.services` (`policies.summary_io`), never
through an import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

from policies.context import CurationContext, PinSpec
from policies.messages import Message

__all__ = [
    "Action",
    "ActionKind",
    "AsyncCurator",
    "AsyncOnlyError",
    "CurationContext",
    "Curator",
    "CuratorOutput",
    "PinSpec",
    "TextCutter",
]

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
