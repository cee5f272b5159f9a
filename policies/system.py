"""system_preservation: declares which messages are pinned.

Pinning is not something one curator can do alone: every curator that drops or shortens
messages must leave the pinned ones alone. So this curator only *declares* the pins; the
policy loader puts its `pin_spec()` into `Policy.pins`, every request's `CurationContext`
carries it, and every other curator asks `ctx.pinned(messages)`. That is why `curate`
passes the messages through unchanged, wherever it sits in the chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from policies import params
from policies.base import CurationContext, CuratorOutput, PinSpec
from policies.messages import Message

PINNABLE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class SystemPreservation:
    """Pins messages by role (and optionally the first user message) for the whole chain."""

    name: ClassVar[str] = "system_preservation"

    roles: tuple[str, ...] = ("system", "developer")
    pin_first_user: bool = False

    def __post_init__(self) -> None:
        roles = params.names("roles", self.roles, allowed=PINNABLE_ROLES, allow_empty=False)
        object.__setattr__(self, "roles", roles)
        params.boolean("pin_first_user", self.pin_first_user)

    def pin_spec(self) -> PinSpec:
        return PinSpec(roles=frozenset(self.roles), first_user=self.pin_first_user)

    def curate(
        self,
        messages: Sequence[Message],
        ctx: CurationContext,  # noqa: ARG002 - the Curator protocol's signature
    ) -> CuratorOutput:
        return CuratorOutput(list(messages))
