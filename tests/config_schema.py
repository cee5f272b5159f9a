"""Every key the config loader accepts, found by running the loader itself.

The loader names the keys it accepts at each level when it reads a mapping
(`Reader.mapping(value, path, allowed)`; any other key is refused as unknown). So the
schema is read off the loader, not written down a second time: `load_config` is run on a
config that starts empty, every mapping read records its allowed keys, each of those keys is
then given an empty mapping (a list of one, where the loader said it wants a list, an entry
`x` in a mapping of names), and the loader is run again, until no new key turns up. Values
are nonsense, so every run fails validation; only what the loader read matters.

Keys are written as the docs write them: `upstreams.*.base_url` (`*` for a name or glob the
user picks), `routes[].match.path` (`[]` for a list item). A policy's own keys (inside
`policies.<name>`) are the policy loader's and documented in the policy reference, so the
walk stops at `policies.*`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

from policies.errors import ConfigError
from policies.validate import Problems, Reader
from proxy.config.loader import load_config

KeyPath = tuple[str | int, ...]
MAX_ROUNDS = 20
NAME = "x"
"""The name given to an entry of a mapping of names (an upstream, a model glob, ...)."""


@dataclass
class Schema:
    """What the loader read: each mapping's allowed keys, and the mappings of names."""

    keys: set[str] = field(default_factory=set)
    """Every accepted key, e.g. `server.port`, `upstreams.*.base_url`, `routes[].name`."""
    named: set[str] = field(default_factory=set)
    """Mappings whose keys are names the user picks, e.g. `upstreams`, `models`."""

    def canonical(self, path: KeyPath) -> str:
        """`("upstreams", "openai", "base_url")` -> `upstreams.*.base_url`."""
        out = ""
        for key in path:
            if isinstance(key, int):
                out += "[]"
            else:
                out += ("." if out else "") + ("*" if out in self.named else str(key))
        return out


@dataclass
class _Seen:
    mappings: dict[KeyPath, tuple[str, ...] | None] = field(default_factory=dict)
    lists: set[KeyPath] = field(default_factory=set)


def accepted_keys(tmp: Path) -> Schema:
    """Run the loader on growing configs (files under `tmp`) until it reads no new key."""
    config: dict[str, Any] = {}
    seen = _Seen()
    for round_ in range(MAX_ROUNDS):
        seen = _Seen()
        with _recording(seen):
            _load(config, tmp / f"round{round_}.yaml")
        if not _grow(config, seen):
            return _schema(seen)
    raise AssertionError(f"the loader still read new keys after {MAX_ROUNDS} rounds")


def _load(config: Mapping[str, Any], path: Path) -> None:
    path.write_text(yaml.safe_dump(config))
    with suppress(ConfigError):
        load_config(path, environ={})


@contextmanager
def _recording(seen: _Seen) -> Iterator[None]:
    mapping, add = Reader.mapping, Problems.add

    def recorded_mapping(
        self: Reader, value: object, path: KeyPath, allowed: Any = None
    ) -> Mapping[Any, Any] | None:
        seen.mappings[tuple(path)] = None if allowed is None else tuple(allowed)
        return mapping(self, value, path, allowed)

    def recorded_add(self: Problems, path: KeyPath, message: str) -> None:
        if message.startswith("expected a list"):
            seen.lists.add(tuple(path))
        add(self, path, message)

    with (
        mock.patch.object(Reader, "mapping", recorded_mapping),
        mock.patch.object(Problems, "add", recorded_add),
    ):
        yield


def _policy_own(path: KeyPath) -> bool:
    return len(path) >= 2 and path[0] == "policies"


def _grow(config: dict[str, Any], seen: _Seen) -> bool:
    grown = False
    for path in seen.lists:
        parent, key = _node(config, path[:-1]), path[-1]
        if not _policy_own(path) and parent.get(key) == {}:  # type: ignore[union-attr]
            parent[key] = [{}]  # type: ignore[index]
            grown = True
    for path, allowed in seen.mappings.items():
        node = _node(config, path)
        if _policy_own(path) or not isinstance(node, dict):
            continue
        for key in (NAME,) if allowed is None and not node else allowed or ():
            if key not in node:
                node[key] = {}
                grown = True
    return grown


def _node(config: Any, path: KeyPath) -> Any:
    for key in path:
        config = config[key]
    return config


def _schema(seen: _Seen) -> Schema:
    schema = Schema()
    for path in sorted(seen.mappings, key=len):  # a parent is named before its children
        if seen.mappings[path] is None:
            schema.named.add(schema.canonical(path))
    for path, allowed in seen.mappings.items():
        if not _policy_own(path):
            schema.keys.update(schema.canonical((*path, key)) for key in allowed or ())
    return schema
