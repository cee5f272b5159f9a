"""What `curator simulate` is asked (`Options`) and what it finds (`SimulatedRequest`,
`Report`): shared by the simulation (`proxy.cli.simulate`) and its rendering
(`proxy.cli.simulate_render`), so neither imports the other's module for its types."""

from __future__ import annotations

from dataclasses import dataclass

from policies.chain import CurationResult
from policies.messages import Message
from policies.policy import Budget
from policies.prefix_cache import DEFAULT_CACHED_PRICE, PrefixCache, SequenceCost
from policies.summary_io import SummaryStats
from proxy.cli.simulate_input import Request


@dataclass(frozen=True, slots=True)
class Options:
    """What `curator simulate` was asked to do."""

    input: str
    """A file path, or "-" for standard input."""
    route: str | None = None
    policy: str | None = None
    """A policy of the config, or `preset:<name>`."""
    model: str | None = None
    """Replaces every request's model (so routing, counting and the window follow it)."""
    allow_calls: bool = False
    cached_price: float = DEFAULT_CACHED_PRICE
    diff: bool = False
    json: bool = False
    store: StoreQuery | None = None
    """Read the requests from an audit store (`--since`) instead of `input`."""


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """Which audit records to simulate: those of [since, until), of one conversation if
    asked, from the store `path` names (else the config's `audit:` section)."""

    since: str
    config: str | None = None
    """The `--config` given (its `audit:` section names the store), if any."""
    until: str | None = None
    path: str | None = None
    sink: str | None = None
    conversation: str | None = None


@dataclass(frozen=True, slots=True)
class SimulatedRequest:
    """What the policy did to one request."""

    request: Request
    route: str | None
    policy: str
    budget: Budget
    tokens_before: int
    result: CurationResult | None = None
    """None when the request was rejected or skipped."""
    rejected: str | None = None
    """The proxy's 400 when the policy says `on_overflow: reject`."""
    skipped: str | None = None
    """Why the proxy would forward the request without curating it."""
    summaries: SummaryStats | None = None

    @property
    def curated(self) -> list[Message]:
        return self.result.messages if self.result is not None else self.request.messages


@dataclass(frozen=True, slots=True)
class Report:
    """Every request's outcome, and the prefix-cache price of both sequences."""

    outcomes: tuple[SimulatedRequest, ...]
    original: SequenceCost
    curated: SequenceCost
    pricing: PrefixCache
