"""Config YAML -> frozen dataclasses. All validation happens at load (see `load_config`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.models import ModelTable
from policies.policy import Policy

DEFAULT_UPSTREAM = "https://api.openai.com/v1"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    name: str
    base_url: str
    """No trailing slash; request paths under /v1 are appended to it."""
    api_key: str | None = None
    """Set: replaces the client's Authorization. None/empty: the client's is passed through."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    """Longest silence allowed between two bytes of the response (SSE pauses included)."""


@dataclass(frozen=True, slots=True)
class RouteMatch:
    path: str | None = None
    """Glob on the request path, e.g. /v1/chat/completions. None matches any path."""
    model: str | None = None
    """Glob on the body's `model`. None matches any model (and bodies without one)."""
    headers: tuple[tuple[str, str], ...] = ()
    """(lower-cased header name, glob on its value); all must match."""


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    upstream: str
    policy: str
    match: RouteMatch = field(default_factory=RouteMatch)
    allow_policy_header: bool = False


@dataclass(frozen=True, slots=True)
class Config:
    source: str
    """The config file's path, or "<defaults>"."""
    server: ServerConfig
    upstreams: Mapping[str, UpstreamConfig]
    policies: Mapping[str, Policy]
    routes: tuple[Route, ...]
    models: ModelTable = field(default_factory=ModelTable)
