"""What `curator simulate` is asked (`Options`) and what it finds (`SimulatedRequest`,
`Report`): shared by the simulation (`proxy.cli.simulate`) and its rendering
(`proxy.cli.simulate_render`), so neither imports the other's module for its types."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from policies.chain import CurationResult
from policies.messages import Message
from policies.policy import Budget
from policies.prefix_cache import DEFAULT_CACHED_PRICE, PrefixCache, RequestCost
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
    summary: bool = False
    """Totals per route and policy instead of a report per request."""
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
class Priced:
    """One simulated request, and the prefix-cache price of it as sent and as curated
    (each after every request before it)."""

    outcome: SimulatedRequest
    original: RequestCost
    curated: RequestCost


@dataclass(slots=True)
class CostTotal:
    """Costs of a sequence of requests, added up."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0

    @property
    def hit_ratio(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    def add(self, cost: RequestCost) -> None:
        self.input_tokens += cost.input_tokens
        self.cached_tokens += cost.cached_tokens
        self.cost += cost.cost


@dataclass(slots=True)
class Report:
    """The totals of the requests simulated so far, added up as they go by: what a report
    holds does not grow with them, but for 8 bytes per over-budget request (the median of
    their budget use)."""

    pricing: PrefixCache
    requests: int = 0
    rejected: int = 0
    skipped: int = 0
    tokens_before: int = 0
    """Of the requests curated (neither rejected nor skipped), as `tokens_after`."""
    tokens_after: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    """Actions per curator, in the order curators first acted."""
    shares: array[float] = field(default_factory=lambda: array("d"))
    """Budget use of each request that arrived over its budget."""
    original: CostTotal = field(default_factory=CostTotal)
    curated: CostTotal = field(default_factory=CostTotal)

    def add(self, priced: Priced) -> None:
        outcome, result = priced.outcome, priced.outcome.result
        self.requests += 1
        self.rejected += outcome.rejected is not None
        self.skipped += outcome.skipped is not None
        self.original.add(priced.original)
        self.curated.add(priced.curated)
        if result is None:
            return
        self.tokens_before += outcome.tokens_before
        self.tokens_after += result.tokens_after
        for action in result.actions:
            self.actions[action.curator] = self.actions.get(action.curator, 0) + 1
        if 0 < outcome.budget.messages < outcome.tokens_before:
            self.shares.append(result.tokens_after / outcome.budget.messages)
