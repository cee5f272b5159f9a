"""Route selection (first match wins) and the policy a request ends up with.

What can be prepared is prepared at load: header names are lower-cased by the config
loader, and fnmatch compiles each glob once and caches it. Per request this module only
matches strings, and lower-cases the request's header names only if a route needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from policies.policy import Policy
from proxy.config.loader import Route, RouteMatch
from proxy.protocols.vendor import VENDORS, Vendor

POLICY_HEADER = "x-curator-policy"
POLICY_HEADER_RAW = POLICY_HEADER.encode()
"""As it is matched in the raw ASGI headers."""

HeaderStatus = Literal["absent", "applied", "unknown", "not_allowed"]
"""What became of a request's `x-curator-policy` header."""


def select_route(
    routes: Sequence[Route],
    path: str,
    model: str | None,
    headers: Mapping[str, str],
) -> Route | None:
    """The first route whose match fits the request, or None.

    `path` is the URL path without the query. A missing `model` is matched as "", so a
    `model: "*"` route still takes requests without a body (GET /v1/models).
    """
    lowered: Mapping[str, str] | None = None
    for route in routes:
        match = route.match
        if match.headers and lowered is None:
            lowered = _lower_names(headers)
        if _matches(match, path, model or "", lowered):
            return route
    return None


def _matches(match: RouteMatch, path: str, model: str, headers: Mapping[str, str] | None) -> bool:
    if match.path is not None and not fnmatchcase(path, match.path):
        return False
    if match.model is not None and not fnmatchcase(model, match.model):
        return False
    if not match.headers:
        return True
    found = headers or {}
    return all(name in found and fnmatchcase(found[name], glob) for name, glob in match.headers)


def _lower_names(headers: Mapping[str, str]) -> Mapping[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@dataclass(frozen=True, slots=True)
class PolicyChoice:
    """The policy a request gets, and what became of its `x-curator-policy` header."""

    name: str
    policy: Policy
    header: HeaderStatus = "absent"
    requested: str | None = None
    """The header's value when the request sent one."""
    left: tuple[str, ...] = ()
    """Edit types the request asked the provider to apply itself, so the proxy left them to
    it (`proxy.curation.provider_edits`)."""


def choose_policy(
    route: Route, headers: Mapping[str, str], policies: Mapping[str, Policy]
) -> PolicyChoice:
    """The route's policy, or the one the client names in `x-curator-policy` if allowed.

    An unknown or disallowed name keeps the route's policy; `header` says so, so the proxy
    can tell the client instead of silently ignoring it.
    """
    default = PolicyChoice(route.policy, policies[route.policy])
    requested = _header(headers, POLICY_HEADER)
    if requested is None:
        return default
    requested = requested.strip()
    if not route.allow_policy_header:
        return PolicyChoice(default.name, default.policy, "not_allowed", requested)
    chosen = policies.get(requested)
    if chosen is None:
        return PolicyChoice(default.name, default.policy, "unknown", requested)
    return PolicyChoice(requested, chosen, "applied", requested)


class Router:
    """`select_route` and `choose_policy` over one config's routes, memoized where the
    request's headers play no part: when no route matches on a header, the route follows
    from (path, model); without an `x-curator-policy` header, the policy from the route.

    Saves a few microseconds a request (~2% of a small passthrough, measured). Paths and
    models are client input, so the memo is bounded: it starts over when full.
    Thread-safe: big bodies are routed in worker threads, and a lost entry is only
    recomputed.
    """

    def __init__(
        self,
        routes: Sequence[Route],
        policies: Mapping[str, Policy],
        capacity: int = 1024,
        kinds: Mapping[str, str] | None = None,
    ) -> None:
        self.routes = tuple(routes)
        self.policies = policies
        kind_of = kinds or {}
        # Each vendor's requests see only the routes to its own kind of upstream
        # (`proxy.protocols.vendor`): first match wins among those.
        self._by_vendor: dict[str, tuple[Route, ...]] = {
            vendor: tuple(r for r in self.routes if kind_of.get(r.upstream, "openai") == vendor)
            for vendor in VENDORS
        }
        self._by_headers = any(route.match.headers for route in self.routes)
        self._capacity = capacity
        self._memo: dict[tuple[str, str | None, str], Route | None] = {}
        self._defaults = {
            route.name: PolicyChoice(route.policy, policies[route.policy])
            for route in self.routes
            if route.policy in policies
        }

    def route(
        self,
        path: str,
        model: str | None,
        headers: Mapping[str, str],
        vendor: Vendor = "openai",
    ) -> Route | None:
        """As `select_route`, among the routes to `vendor`'s kind of upstream."""
        routes = self._by_vendor[vendor]
        if self._by_headers:
            return select_route(routes, path, model, headers)
        key = (path, model, vendor)
        try:
            return self._memo[key]
        except KeyError:
            pass
        found = select_route(routes, path, model, headers)
        if len(self._memo) >= self._capacity:
            self._memo.clear()
        self._memo[key] = found
        return found

    def policy(self, route: Route, headers: Mapping[str, str]) -> PolicyChoice:
        """As `choose_policy`."""
        if not headers:
            default = self._defaults.get(route.name)
            if default is not None:
                return default
        return choose_policy(route, headers, self.policies)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup of a lower-case `name`, without copying the headers."""
    value = headers.get(name)
    if value is not None:
        return value
    return next((v for k, v in headers.items() if k.lower() == name), None)
