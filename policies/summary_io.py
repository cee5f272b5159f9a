"""What a summarizer exchanges with the world outside `policies/`.

The core never does I/O itself: whoever runs a chain hands it `Services`, whose
`complete` sends messages to a model and whose caches keep summaries across requests
(the proxy builds them in `proxy.summarizing`; `curator simulate` uses placeholders).
Only the summarizer reads these; the generic curator contract (`policies.base`) carries
them as an opaque `services` field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from policies.messages import Message


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Where and how to summarize: what a summarizer asks its `complete` callable for."""

    upstream: str
    """The name of an upstream in the proxy's config."""
    model: str
    max_tokens: int
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer to a summary request, with the usage the upstream reported."""

    text: str
    prompt_tokens: int = 0
    """0 when the upstream did not report usage."""
    completion_tokens: int = 0


Complete = Callable[[list[Message], SummaryRequest], Awaitable[Completion]]
"""Sends chat messages to a model and returns its answer; raises on any failure."""


@dataclass(slots=True)
class SummaryStats:
    """What summarizers did for one request; the proxy reads it for metrics and audit."""

    calls: int = 0
    """Model calls made (each one a cache miss)."""
    cache_hits: int = 0
    failures: int = 0
    """Calls that failed or timed out; the request went on without a summary."""
    cache_errors: int = 0
    """Cache reads or writes that failed (treated as misses)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_saved: int = 0
    """Tokens the summarized messages took, minus the summaries' own tokens."""
    errors: list[str] = field(default_factory=list)
    """One line per failure, for the audit log."""


class SummaryCache(Protocol):
    """Summary texts by key, shared by every request that names the same cache."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """The cached text for each key, None where there is none (one round trip)."""
        ...

    async def put(self, key: str, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Services:
    """The I/O a request's curators may use, handed in by whoever runs the chain."""

    complete: Complete
    caches: Mapping[str, SummaryCache] = field(default_factory=dict)
    """Summary caches by a summarizer's `cache` setting ("memory", "redis://..."); a
    summarizer whose setting has no entry here summarizes without a cache."""
    stats: SummaryStats = field(default_factory=SummaryStats)
