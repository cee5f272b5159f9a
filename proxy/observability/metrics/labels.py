"""The label values metrics may use: names from the config, and small fixed sets.

Label values never come from free client input, so cardinality stays bounded: a route,
policy or curator name the config does not hold becomes `other`, a missing one `none`.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.config.loader import Config
from proxy.protocols import PROTOCOLS

NONE = "none"
OTHER = "other"
REJECT_REASONS = (
    "invalid_proxy_key",
    "request_too_large",
    "proxy_overloaded",
    "request_header_too_large",
    "header_timeout",
    "request_timeout",
    "too_many_connections",
    "connection_evicted",
)
INCOMPLETE_REASONS = frozenset(
    {"upstream_timeout", "upstream_error", "upstream_unreachable", "client_disconnect", "shutdown"}
)
"""Why a response was not complete: the upstream's error code mid-response, or these two."""
KNOWN_SKIPS = frozenset(
    {"curator_error", "would_reject", "curated_empty"}.union(*(p.skip_reasons for p in PROTOCOLS))
)
"""Why curation was skipped: the curation's own reasons, and each protocol's."""


@dataclass(frozen=True, slots=True)
class Labels:
    """The bounded sets label values are drawn from; anything else becomes `other`."""

    routes: frozenset[str]
    policies: frozenset[str]
    curators: frozenset[str]

    def route(self, value: str | None) -> str:
        return _bounded(value, self.routes)

    def policy(self, value: str | None) -> str:
        return _bounded(value, self.policies)

    def curator(self, value: str) -> str:
        return _bounded(value, self.curators)


def _bounded(value: str | None, allowed: frozenset[str]) -> str:
    if value is None:
        return NONE
    return value if value in allowed else OTHER


def labels_for(config: Config) -> Labels:
    """The label values metrics may use: the config's route, policy and curator names."""
    curators = {c.name for p in config.policies.values() for c in p.chain.curators}
    return Labels(
        routes=frozenset(r.name for r in config.routes),
        policies=frozenset(config.policies),
        curators=frozenset(curators),
    )
