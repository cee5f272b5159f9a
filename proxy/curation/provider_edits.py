"""What a Messages request asked the provider to clear is left to the provider.

Anthropic's `context_management` (beta `context-management-2025-06-27`) lists edits the
provider applies itself, server side, before the model reads the prompt: a
`clear_tool_uses_20250919` edit replaces old tool results once the prompt passes its
trigger, a `clear_thinking_20251015` edit drops the thinking of older turns (Claude Code
sends one on every request). The body goes upstream with its `context_management` as sent;
per edit type, the proxy does not cut what the provider was asked to clear:

- `clear_tool_uses`: the curators that clear or mask old tool results are left out for the
  request (`tool_result_truncation`, `tool_use_clearing`, `turn_masking`), and
  `history_retention` keeps tool results whole (`tool: full`). The provider clears by its
  own trigger and `keep`; clearing twice would break its cache twice. `token_budget` stays:
  it acts only when the prompt would not fit the window at all.
- `clear_thinking`: nothing to leave out. The proxy never edits a thinking block (it keeps
  or drops a turn whole); the edit passes through.

The response says what was left to the provider: `x-curator-left-to-provider:
clear_tool_uses,clear_thinking` (the edit types without their date suffix, in the order
the request listed them). Other edit types pass through and are not named.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from policies.chain import Chain
from policies.history_retention import HistoryRetention
from policies.messages import MAPPING
from policies.policy import Policy
from proxy.protocols.vendor import Vendor
from proxy.serving.routing import PolicyChoice

LEFT_HEADER = b"x-curator-left-to-provider"
CLEAR_TOOL_USES = "clear_tool_uses"
CLEAR_THINKING = "clear_thinking"
KNOWN = (CLEAR_TOOL_USES, CLEAR_THINKING)
CLEARS_TOOL_RESULTS = frozenset({"tool_result_truncation", "tool_use_clearing", "turn_masking"})
"""Curators left out of a request whose provider clears tool uses itself."""
_DATED = re.compile(r"_\d{8}$")


def requested_edits(body: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The known edit types `body`'s `context_management` asks for, undated, in order."""
    managed = body.get("context_management") if body is not None else None
    edits = managed.get("edits") if isinstance(managed, MAPPING) else None
    if not isinstance(edits, list):
        return ()
    found: list[str] = []
    for edit in edits:
        kind = edit.get("type") if isinstance(edit, MAPPING) else None
        undated = _DATED.sub("", kind) if isinstance(kind, str) else None
        if undated in KNOWN and undated not in found:
            found.append(undated)
    return tuple(found)


def left_to_provider(
    choice: PolicyChoice, vendor: Vendor, body: Mapping[str, Any] | None
) -> PolicyChoice:
    """`choice` with what the provider was asked to clear left to it (see the module
    docstring); `choice` itself when the request asked for nothing the proxy knows."""
    if vendor != "anthropic":
        return choice
    edits = requested_edits(body)
    if not edits:
        return choice
    policy = choice.policy
    if CLEAR_TOOL_USES in edits:
        policy = leaving_tool_results(policy)
    return dataclasses.replace(choice, policy=policy, left=edits)


def leaving_tool_results(policy: Policy) -> Policy:
    """`policy` without the curators that clear or mask old tool results."""
    kept = []
    for curator in policy.chain.curators:
        if curator.name in CLEARS_TOOL_RESULTS:
            continue
        if isinstance(curator, HistoryRetention) and curator.tool != "full":
            curator = dataclasses.replace(curator, tool="full")
        kept.append(curator)
    if len(kept) == len(policy.chain.curators) and all(
        a is b for a, b in zip(kept, policy.chain.curators, strict=True)
    ):
        return policy
    return dataclasses.replace(policy, chain=Chain(tuple(kept)))
