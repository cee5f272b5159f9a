"""Policy YAML -> `Policy`, through a name -> class registry of curators.

A policy comes from a mapping (inline in a config), a file, or a shipped preset
(`preset:<name>`, from `policies/presets/<name>.yaml`). Every problem is collected with its
file, line and key path, and raised once as a `ConfigError`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from policies.base import Curator, PinSpec
from policies.chain import Chain
from policies.errors import ConfigError, ParamError, Problem
from policies.policy import OnOverflow, OnUpstreamOverflow, Policy
from policies.validate import Problems, Reader, describe, one_of, suggest
from policies.yamlsrc import KeyPath, Located, parse, parse_file

Registry = Mapping[str, type[Curator]]

PRESET_PREFIX = "preset:"
POLICY_KEYS = (
    "context_window",
    "reserve_output_tokens",
    "on_overflow",
    "on_upstream_overflow",
    "curators",
)
ON_OVERFLOW = ("truncate", "reject", "forward")
ON_UPSTREAM_OVERFLOW = ("retry", "pass")
_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@runtime_checkable
class PinSource(Protocol):
    """A curator that decides which messages are pinned (system_preservation)."""

    def pin_spec(self) -> PinSpec: ...


def default_registry() -> Registry:
    # Imported late so this module loads (and can be tested) without every curator.
    from policies.registry import CURATORS

    return CURATORS


def load_policy(
    data: object,
    *,
    name: str,
    file: str,
    lines: Mapping[KeyPath, int],
    base_path: KeyPath = (),
    registry: Registry | None = None,
) -> Policy:
    """Build the policy `data` describes; `base_path` is where it sits in `file`."""
    problems = Problems(file, lines)
    policy = build_policy(data, name=name, path=base_path, problems=problems, registry=registry)
    problems.raise_if_any()
    return policy


def load_policy_file(
    path: str | Path,
    *,
    name: str | None = None,
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
) -> Policy:
    """Load a policy from its own YAML file; errors name that file and paths within it."""
    located = parse_file(path, env=env)
    return _load_located(located, name or Path(path).stem, registry)


def preset_names() -> tuple[str, ...]:
    folder = resources.files("policies").joinpath("presets")
    names = (p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
    return tuple(sorted(names))


def load_preset(
    preset: str, *, name: str | None = None, registry: Registry | None = None
) -> Policy:
    """Load a shipped preset by name (`default`, `coding-agent`, `chat`, `passthrough`)."""
    if preset not in preset_names():
        message = _unknown_preset(preset)
        raise ConfigError([Problem(PRESET_PREFIX + preset, None, "", message)])
    resource = resources.files("policies").joinpath("presets", f"{preset}.yaml")
    located = parse(resource.read_text(encoding="utf-8"), str(resource))
    return _load_located(located, name or preset, registry)


def policy_from_spec(
    spec: object,
    *,
    name: str,
    path: KeyPath,
    problems: Problems,
    base_dir: Path,
    registry: Registry | None = None,
    env: Mapping[str, str] | None = None,
) -> Policy | None:
    """A config's policy entry: a file path (relative to `base_dir`), `preset:<name>`, or inline.

    Problems go to `problems`; a policy in its own file reports that file's lines.
    Returns None when nothing usable could be built.
    """
    if isinstance(spec, Mapping):
        return build_policy(spec, name=name, path=path, problems=problems, registry=registry)
    if not isinstance(spec, str) or not spec:
        expected = "a policy file path, 'preset:<name>' or a mapping"
        problems.add(path, f"expected {expected}, got {describe(spec)}")
        return None
    try:
        if spec.startswith(PRESET_PREFIX):
            preset = spec.removeprefix(PRESET_PREFIX)
            if preset not in preset_names():
                problems.add(path, _unknown_preset(preset))
                return None
            return load_preset(preset, name=name, registry=registry)
        file = base_dir / spec
        if not file.is_file():
            problems.add(path, f"policy file not found: {file}")
            return None
        return load_policy_file(file, name=name, registry=registry, env=env)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return None


def build_policy(
    data: object,
    *,
    name: str,
    path: KeyPath,
    problems: Problems,
    registry: Registry | None = None,
) -> Policy:
    """Validate `data` as a policy, adding problems to `problems`; returns a best-effort Policy."""
    if not isinstance(data, Mapping):
        problems.add(path, f"expected a policy mapping, got {describe(data)}")
        return Policy(name)
    problems.unknown_keys(data, POLICY_KEYS, path)
    window = _auto_int(data, "context_window", 1, path, problems)
    reserve = _auto_int(data, "reserve_output_tokens", 0, path, problems)
    on_overflow: OnOverflow = Reader(problems).get(
        data, "on_overflow", path, "truncate", one_of(*ON_OVERFLOW)
    )
    upstream_overflow: OnUpstreamOverflow = Reader(problems).get(
        data, "on_upstream_overflow", path, "retry", one_of(*ON_UPSTREAM_OVERFLOW)
    )
    curators = _curators(data.get("curators"), (*path, "curators"), problems, registry)
    pins = next((c.pin_spec() for c in curators if isinstance(c, PinSource)), PinSpec())
    chain = Chain(curators)
    return Policy(name, chain, window, reserve, on_overflow, pins, upstream_overflow)


def _load_located(located: Located, name: str, registry: Registry | None) -> Policy:
    problems = Problems(located.file, located.lines, located.hidden)
    problems.extend(located.problems)
    policy = build_policy(located.data, name=name, path=(), problems=problems, registry=registry)
    problems.raise_if_any()
    return policy


def _unknown_preset(preset: str) -> str:
    names = preset_names()
    return f"unknown preset {preset!r}{suggest(preset, names)} (presets: {', '.join(names)})"


def _auto_int(
    data: Mapping[str, Any], key: str, minimum: int, path: KeyPath, problems: Problems
) -> int | None:
    value = data.get(key, "auto")
    if value == "auto":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    bound = "> 0" if minimum == 1 else f">= {minimum}"
    problems.add((*path, key), f"expected 'auto' or an integer {bound}, got {describe(value)}")
    return None


def _curators(
    items: object, path: KeyPath, problems: Problems, registry: Registry | None
) -> tuple[Curator, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        problems.add(path, f"expected a list of curators, got {describe(items)}")
        return ()
    known = default_registry() if registry is None else registry
    built: list[Curator] = []
    pin_source: int | None = None
    for i, item in enumerate(items):
        curator = _curator(item, (*path, i), problems, known)
        if curator is None:
            continue
        if isinstance(curator, PinSource):
            if pin_source is not None:
                message = f"{curator.name} appears twice (also curators[{pin_source}])"
                problems.add((*path, i), message + "; which messages are pinned would be ambiguous")
                continue
            pin_source = i
        built.append(curator)
    return tuple(built)


def _curator(item: object, path: KeyPath, problems: Problems, registry: Registry) -> Curator | None:
    if isinstance(item, str):
        name, params = item, None
    elif isinstance(item, Mapping) and len(item) == 1:
        ((name, params),) = item.items()
    else:
        hint = ""
        if isinstance(item, Mapping) and len(item) > 1:
            hint = f" (got keys {', '.join(map(str, item))}: indent parameters under the name)"
        expected = "a curator name or a single-key mapping {name: {parameters}}"
        problems.add(path, f"expected {expected}, got {describe(item)}{hint}")
        return None
    cls = registry.get(name) if isinstance(name, str) else None
    if cls is None:
        choices = sorted(registry)
        problems.add(
            path,
            f"unknown curator {name!r}{suggest(str(name), choices)} (known: {', '.join(choices)})",
        )
        return None
    params_path = (*path, name) if isinstance(item, Mapping) else path
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        problems.add(params_path, f"expected a mapping of parameters, got {describe(params)}")
        return None
    return _construct(cls, dict(params), params_path, problems)


def _construct(
    cls: type[Curator], params: dict[str, Any], path: KeyPath, problems: Problems
) -> Curator | None:
    if dataclasses.is_dataclass(cls):
        fields = [f for f in dataclasses.fields(cls) if f.init]
        names = [f.name for f in fields]
        bad = [key for key in params if key not in names]
        for key in bad:
            choices = ", ".join(names) or "none"
            message = f"unknown parameter {key!r}{suggest(str(key), names)} (parameters: {choices})"
            problems.add((*path, key), message)
        missing = [repr(f.name) for f in fields if f.name not in params and _required(f)]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            problems.add(path, f"missing required parameter{plural} {', '.join(missing)}")
        if bad or missing:
            return None
    try:
        return cls(**params)
    except ParamError as exc:
        problems.add((*path, *_field_path(exc.field)), exc.message)
    except (TypeError, ValueError) as exc:
        problems.add(path, str(exc))
    return None


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _field_path(field: str) -> KeyPath:
    """`roles[1]` -> ("roles", 1), so the problem's line is the item's own line."""
    parts = _FIELD_PART.findall(field)
    return tuple(int(index) if index else key for key, index in parts) or (field,)
