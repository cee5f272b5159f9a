"""Config YAML -> frozen dataclasses. All validation happens at load (see `load_config`).

Every problem is collected as `file:line: key.path: problem` and raised once, so an operator
fixes a config in one pass. Each top-level section has a parser in `SECTIONS`; a new section
is one more entry there.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from policies import validate as v
from policies.errors import ConfigError, Problem
from policies.loader import PRESET_PREFIX, Registry, load_preset, policy_from_spec
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.pricing import PriceTable
from policies.summarizer import Summarizer
from policies.validate import Problems, Reader
from policies.yamlsrc import KeyPath, parse_file
from proxy.config.audit import DEFAULT_PATHS, AuditConfig, read_audit
from proxy.config.auth import AuthConfig, read_auth
from proxy.config.limits import LIMIT_KEYS, Limits, read_limits
from proxy.config.metrics import MetricsConfig, read_metrics
from proxy.config.models import read_models
from proxy.config.otel import OtelConfig, read_otel
from proxy.config.prices import read_prices
from proxy.config.routes import MODES as MODES
from proxy.config.routes import Mode as Mode
from proxy.config.routes import Route as Route
from proxy.config.routes import RouteMatch as RouteMatch
from proxy.config.routes import read_routes
from proxy.config.stamps import NO_SOURCES
from proxy.config.stamps import ConfigFileError as ConfigFileError
from proxy.config.stamps import FileStamp as FileStamp
from proxy.config.stamps import file_stamp as file_stamp
from proxy.config.upstreams import UpstreamConfig as UpstreamConfig
from proxy.config.upstreams import base_url_problem, read_upstreams
from proxy.config.viewer import ViewerConfig, read_viewer

DEFAULT_UPSTREAM = "https://api.openai.com/v1"
DEFAULTS_SOURCE = "<defaults>"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    limits: Limits = field(default_factory=Limits)
    """max_body_mb, max_inflight, max_messages, max_json_depth, shutdown_grace_s."""


@dataclass(frozen=True, slots=True)
class Config:
    source: str
    """The config file's path, or "<defaults>"."""
    server: ServerConfig
    upstreams: Mapping[str, UpstreamConfig]
    policies: Mapping[str, Policy]
    routes: tuple[Route, ...]
    models: ModelTable = field(default_factory=ModelTable)
    sources: Mapping[str, FileStamp | None] = field(default_factory=lambda: NO_SOURCES)
    """Every file this config was read from (itself, then policy files), each with its
    stamp from just before it was read: a reload watcher compares against these."""
    audit: AuditConfig = field(default_factory=lambda: AuditConfig(sink="none"))
    """Off for a Config built in code; `load_config` and `default_config` turn it on."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    prices: PriceTable = field(default_factory=PriceTable)
    """Model glob -> price per million tokens: the `prices:` section, then built-ins."""
    viewer: ViewerConfig = field(default_factory=ViewerConfig)
    otel: OtelConfig = field(default_factory=OtelConfig)
    """OpenTelemetry export: off unless `otel.enabled`."""


def load_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> Config:
    """Load and validate a config file; `${VAR}` values come from `environ` (os.environ)."""
    file = Path(path)
    env = os.environ if environ is None else environ
    stamped = {str(file): file_stamp(str(file))}  # before reading: a later write is a change
    try:
        located = parse_file(file, env=env)
    except ConfigError as exc:
        raise ConfigFileError(exc.problems, stamped) from None
    problems = Problems(str(file), located.lines, located.hidden)
    problems.extend(located.problems)
    build = _Build(Reader(problems), file.parent, env, registry, sources=stamped)
    data = build.read.mapping(located.data, (), SECTIONS)
    if data is None:
        raise ConfigFileError(problems.items, stamped)
    for section, parser in SECTIONS.items():
        if data.get(section) is not None:
            parser(build, data[section], (section,))
        elif section in REQUIRED:
            build.problems.add((), f"missing required section {section!r}")
    try:
        problems.raise_if_any()
    except ConfigError as exc:
        raise ConfigFileError(exc.problems, build.sources) from None
    return build.config(str(file))


def default_config(
    environ: Mapping[str, str] | None = None, *, registry: Registry | None = None
) -> Config:
    """Built-in defaults: one route to $CURATOR_UPSTREAM (or OpenAI) with the default preset.

    No api_key: the client's own Authorization header is passed through.
    """
    env = os.environ if environ is None else environ
    base_url = env.get("CURATOR_UPSTREAM") or DEFAULT_UPSTREAM
    error = base_url_problem(base_url)
    if error is not None:
        raise ConfigError(
            [Problem("$CURATOR_UPSTREAM", None, "", f"{error} (its value is not shown)")]
        )
    upstream = UpstreamConfig("default", base_url.rstrip("/"))
    return Config(
        source=DEFAULTS_SOURCE,
        server=ServerConfig(),
        upstreams=types.MappingProxyType({"default": upstream}),
        policies=types.MappingProxyType({"default": load_preset("default", registry=registry)}),
        routes=(Route("default", upstream="default", policy="default"),),
        audit=AuditConfig(path=os.path.abspath(DEFAULT_PATHS["sqlite"])),
    )


@dataclass(slots=True)
class _Build:
    """What one `load_config` call has gathered so far (lives only for that call)."""

    read: Reader
    base_dir: Path
    env: Mapping[str, str]
    registry: Registry | None
    server: ServerConfig = field(default_factory=ServerConfig)
    upstreams: dict[str, UpstreamConfig] = field(default_factory=dict)
    policies: dict[str, Policy] = field(default_factory=dict)
    models: list[tuple[str, ModelInfo]] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    audit: AuditConfig | None = None
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    prices: PriceTable = field(default_factory=PriceTable)
    viewer: ViewerConfig = field(default_factory=ViewerConfig)
    otel: OtelConfig = field(default_factory=OtelConfig)
    sources: dict[str, FileStamp | None] = field(default_factory=dict)
    """The config file, then the policy files it names (found or not: a reload watches)."""
    # Names declared even when invalid, so a route naming one gets no second error.
    declared: dict[str, set[str]] = field(
        default_factory=lambda: {"upstream": set(), "policy": set()}
    )

    @property
    def problems(self) -> Problems:
        return self.read.problems

    def config(self, source: str) -> Config:
        return Config(
            source=source,
            server=self.server,
            upstreams=types.MappingProxyType(self.upstreams),
            policies=types.MappingProxyType(self.policies),
            routes=tuple(self.routes),
            models=ModelTable.with_overrides(self.models),
            sources=types.MappingProxyType(self.sources),
            # No `audit:` section: the default sqlite store, beside the config file.
            audit=self.audit
            or AuditConfig(path=str(self.base_dir.absolute() / DEFAULT_PATHS["sqlite"])),
            metrics=self.metrics,
            auth=self.auth,
            prices=self.prices,
            viewer=self.viewer,
            otel=self.otel,
        )


def _server(build: _Build, value: object, path: KeyPath) -> None:
    data = build.read.mapping(value, path, ("host", "port", "workers", *LIMIT_KEYS))
    if data is not None:
        get, default = build.read.get, ServerConfig()
        build.server = ServerConfig(
            host=get(data, "host", path, default.host, v.text),
            port=get(data, "port", path, default.port, v.int_in(1, 65535)),
            workers=get(data, "workers", path, default.workers, v.int_in(1)),
            limits=read_limits(build.read, data, path),
        )


def _upstreams(build: _Build, value: object, path: KeyPath) -> None:
    build.upstreams.update(read_upstreams(build.read, value, path, build.declared["upstream"]))


def _models(build: _Build, value: object, path: KeyPath) -> None:
    build.models.extend(read_models(build.read, value, path))


def _policies(build: _Build, value: object, path: KeyPath) -> None:
    for name, spec, item_path in build.read.named(value, path):
        build.declared["policy"].add(name)
        if isinstance(spec, str) and spec and not spec.startswith(PRESET_PREFIX):
            policy_file = str(build.base_dir / spec)
            build.sources[policy_file] = file_stamp(policy_file)
        known = len(build.problems.items)
        policy = policy_from_spec(
            spec,
            name=name,
            path=item_path,
            problems=build.problems,
            base_dir=build.base_dir,
            registry=build.registry,
            env=build.env,
        )
        if policy is not None:
            build.policies[name] = policy
            # Indexes match the YAML only when every curator was built.
            if len(build.problems.items) == known:
                _summarizer_upstreams(build, policy, item_path)


def _summarizer_upstreams(build: _Build, policy: Policy, path: KeyPath) -> None:
    """Each summarizer's `upstream` must name a configured upstream (parsed before policies)."""
    declared = build.declared["upstream"]
    for i, curator in enumerate(policy.chain.curators):
        if isinstance(curator, Summarizer) and curator.upstream not in declared:
            known = ", ".join(sorted(declared)) or "none"
            at = (*path, "curators", i, Summarizer.name, "upstream")
            build.problems.add(at, f"unknown upstream {curator.upstream!r}; known: {known}")


def _routes(build: _Build, value: object, path: KeyPath) -> None:
    build.routes.extend(read_routes(build.read, value, path, build.declared))


def _audit(build: _Build, value: object, path: KeyPath) -> None:
    build.audit = read_audit(build.read, value, path, base_dir=build.base_dir)


def _metrics(build: _Build, value: object, path: KeyPath) -> None:
    build.metrics = read_metrics(
        build.read, value, path, base_dir=build.base_dir, server_port=build.server.port
    )


def _auth(build: _Build, value: object, path: KeyPath) -> None:
    build.auth = read_auth(build.read, value, path)


def _prices(build: _Build, value: object, path: KeyPath) -> None:
    build.prices = read_prices(build.read, value, path)


def _viewer(build: _Build, value: object, path: KeyPath) -> None:
    build.viewer = read_viewer(build.read, value, path, admin_keys=build.auth.admin_keys)


def _otel(build: _Build, value: object, path: KeyPath) -> None:
    build.otel = read_otel(build.read, value, path)


SECTIONS: Mapping[str, Callable[[_Build, object, KeyPath], None]] = types.MappingProxyType(
    {
        "server": _server,
        "upstreams": _upstreams,
        "models": _models,
        # Routes name upstreams and policies, so they are parsed after both.
        "policies": _policies,
        "routes": _routes,
        "audit": _audit,
        # After `server`, whose port the admin listener must not take.
        "metrics": _metrics,
        "auth": _auth,
        "prices": _prices,
        # After `auth`: a public viewer needs admin keys.
        "viewer": _viewer,
        "otel": _otel,
    }
)
"""Top-level section -> its parser, in the order they run; a new section is one entry."""
REQUIRED = frozenset({"routes"})
