"""The `x-curator-*` response headers of a chat completion: route, mode, policy, token
counts and what each curator touched. Values are ASCII (names from config, numbers)."""

from __future__ import annotations

from collections.abc import Sequence

from policies.base import Action
from policies.chain import CurationResult
from proxy.config.loader import Route
from proxy.serving.routing import PolicyChoice

MODE_HEADER = b"x-curator-mode"


def actions_header(actions: Sequence[Action]) -> str:
    """`curator=n,...`: how many messages each curator touched, in chain order."""
    touched: dict[str, set[int]] = {}
    for action in actions:
        touched.setdefault(action.curator, set()).update(action.indexes)
    return ",".join(f"{name}={len(indexes)}" for name, indexes in touched.items())


def ascii_bytes(value: str) -> bytes:
    return value.encode("ascii", "replace")


def policy_headers(route: Route, choice: PolicyChoice) -> list[tuple[bytes, bytes]]:
    headers = [(b"x-curator-route", ascii_bytes(route.name))]
    if route.mode != "enforce":
        headers.append((MODE_HEADER, route.mode.encode()))
    headers.append((b"x-curator-policy", ascii_bytes(choice.name)))
    if choice.header in ("unknown", "not_allowed"):
        # The client named a policy it cannot have; say so rather than ignore it silently.
        headers.append((b"x-curator-policy-ignored", choice.header.encode()))
    if choice.left:
        headers.append((b"x-curator-left-to-provider", ",".join(choice.left).encode()))
    return headers


def curated_headers(
    route: Route, choice: PolicyChoice, result: CurationResult
) -> tuple[tuple[bytes, bytes], ...]:
    headers = policy_headers(route, choice)
    headers.append((b"x-curator-tokens-before", str(result.tokens_before).encode()))
    headers.append((b"x-curator-tokens-after", str(result.tokens_after).encode()))
    if result.actions:
        headers.append((b"x-curator-actions", ascii_bytes(actions_header(result.actions))))
    return tuple(headers)
