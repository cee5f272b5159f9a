"""What `curator check` prints about a valid config: routes, upstreams (never their keys,
nor credentials in their URLs), models, observability and each policy's chain with its
parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import yaml

from policies.policy import Policy
from policies.urls import mask_urls, masked_url
from proxy.config.loader import Config, Route


def format_config(config: Config) -> str:
    """What `curator check` prints: routes, upstreams (never their keys), models, chains."""
    server = config.server
    lines = [
        f"config: {config.source}: OK",
        f"server: {server.host}:{server.port} ({server.workers} worker(s))",
        *_observability_lines(config),
        "",
        "routes (first match wins):",
    ]
    for i, route in enumerate(config.routes, 1):
        lines.extend(_route_lines(i, route, config))
    if config.models.overrides:
        lines += ["", "models:"]
        for glob, info in config.models.overrides:
            limit = f", max_input_tokens {info.max_input_tokens}" if info.max_input_tokens else ""
            encoding = info.encoding or "tiktoken's own choice"
            lines.append(f"  {glob}: context_window {info.context_window}{limit}, {encoding}")
    lines += ["", "policies:"]
    for name, policy in config.policies.items():
        lines.extend(_policy_lines(name, policy))
    return "\n".join(lines)


def _observability_lines(config: Config) -> list[str]:
    audit, metrics = config.audit, config.metrics
    if audit.enabled:
        patterns = len(audit.redact.patterns)
        redaction = "built-in patterns" if audit.redact.builtin else "no built-in patterns"
        redaction += f" + {patterns} of yours" if patterns else ""
        stored = "responses stored" if audit.store_responses else "responses not stored"
        where = audit.where
        audit_line = f"audit: {audit.sink} {where} ({stored}; redaction: {redaction})"
    else:
        audit_line = "audit: off"
    if not metrics.enabled:
        metrics_line = "metrics: off"
    elif metrics.port is None:
        metrics_line = f"metrics: GET {metrics.path} on the main listener"
    else:
        host = metrics.host or config.server.host
        metrics_line = f"metrics: GET {metrics.path} on the admin listener {host}:{metrics.port}"
    return [audit_line, metrics_line]


def _route_lines(number: int, route: Route, config: Config) -> list[str]:
    match = route.match
    conditions = [f"path={match.path}"] if match.path is not None else []
    conditions += [f"model={match.model}"] if match.model is not None else []
    conditions += [f"header {name}={glob}" for name, glob in match.headers]
    upstream = config.upstreams[route.upstream]
    auth = "client's Authorization passed through"
    if upstream.authorization:
        auth = "api_key set" if upstream.api_key else "Basic credentials from the URL"
    header = "allowed" if route.allow_policy_header else "ignored"
    return [
        f"  {number}. {route.name}",
        f"     match: {' '.join(conditions) if conditions else 'everything'}",
        f"     upstream: {upstream.name} {masked_url(upstream.base_url)} ({auth})",
        f"     policy: {route.policy} (x-curator-policy header {header})",
        f"     mode: {route.mode}{MODE_NOTES[route.mode]}",
    ]


MODE_NOTES = {
    "enforce": "",
    "shadow": " (curated and reported only: the upstream gets the client's exact bytes)",
    "off": " (no curation, no token counting: the upstream gets the client's exact bytes)",
}


def _policy_lines(name: str, policy: Policy) -> list[str]:
    def auto(value: int | None) -> str:
        return "auto" if value is None else str(value)

    pins = ", ".join(sorted(policy.pins.roles)) + (
        " + first user message" if policy.pins.first_user else ""
    )
    lines = [
        f"  {name}:",
        f"    context_window: {auto(policy.context_window)}, "
        f"reserve_output_tokens: {auto(policy.reserve_output_tokens)}, "
        f"on_overflow: {policy.on_overflow}",
        f"    pinned: {pins}",
    ]
    if not policy.chain.curators:
        return [*lines, "    curators: none (requests pass through unchanged)"]
    lines.append("    curators:")
    for curator in policy.chain.curators:
        lines.append(f"      - {curator.name}: {_params(curator)}")
    return lines


def _params(curator: object) -> str:
    """A curator's parameters as YAML flow text, so they can be pasted into a policy."""
    if not dataclasses.is_dataclass(curator):
        return "{}"
    params = {
        f.name: _plain(getattr(curator, f.name)) for f in dataclasses.fields(curator) if f.init
    }
    text: str = yaml.safe_dump(params, default_flow_style=True, sort_keys=False, width=1 << 16)
    return text.strip()


def _plain(value: object) -> object:
    """Only YAML's own types; anything else (a callable, say) is shown by its repr."""
    if isinstance(value, str):
        return mask_urls(value)  # e.g. a summarizer's `cache: redis://:password@host`
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=str)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)
