"""The curator registry: the YAML name of each curator -> its class.

The policy loader builds chains through this mapping, so a curator becomes usable in
YAML by being listed here and nowhere else.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

from policies.base import Curator
from policies.budget import TokenBudget
from policies.coherence import ToolPairCoherence
from policies.dedupe import Dedupe
from policies.history_retention import HistoryRetention
from policies.role_truncation import RoleTruncation
from policies.summarizer import Summarizer
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from policies.turn_masking import TurnMasking
from policies.turns import TurnWindow

_CLASSES: tuple[type[Curator], ...] = (
    SystemPreservation,
    ToolPairCoherence,
    ToolResultTruncation,
    TurnWindow,
    TokenBudget,
    RoleTruncation,
    HistoryRetention,
    ToolUseClearing,
    Dedupe,
    TurnMasking,
    Summarizer,
)

CURATORS: Mapping[str, type[Curator]] = types.MappingProxyType({c.name: c for c in _CLASSES})
"""YAML name -> curator class, read-only."""
