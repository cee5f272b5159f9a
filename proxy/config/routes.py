"""The `routes:` section: route dataclasses and their parser (first match wins)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from policies import validate as v
from policies.validate import Reader, describe, suggest
from policies.yamlsrc import KeyPath


@dataclass(frozen=True, slots=True)
class RouteMatch:
    path: str | None = None
    """Glob on the request path, e.g. /v1/chat/completions. None matches any path."""
    model: str | None = None
    """Glob on the body's `model`. None matches any model (and bodies without one)."""
    headers: tuple[tuple[str, str], ...] = ()
    """(lower-cased header name, glob on its value); all must match."""

    @property
    def matches_all(self) -> bool:
        return self.path is None and self.model is None and not self.headers


Mode = Literal["enforce", "shadow", "off"]
"""enforce: curate and send the curated request. shadow: curate, report and record what
would have changed, send the client's exact bytes. off: no curation and no counting."""
MODES: tuple[Mode, ...] = ("enforce", "shadow", "off")


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    upstream: str
    policy: str
    match: RouteMatch = field(default_factory=RouteMatch)
    allow_policy_header: bool = False
    mode: Mode = "enforce"


def read_routes(
    read: Reader, value: object, path: KeyPath, declared: Mapping[str, set[str]]
) -> list[Route]:
    """The `routes:` list; `declared` holds the upstream and policy names defined so far."""
    routes: list[Route] = []
    if value == []:
        read.problems.add(path, "at least one route is required")
        return routes
    if not isinstance(value, list):
        read.problems.add(path, f"expected a list of routes, got {describe(value)}")
        return routes
    first: dict[str, int] = {}
    catch_all: int | None = None
    for i, item in enumerate(value):
        route = _route(read, item, (*path, i), declared)
        if route is None:
            continue
        if route.name in first:
            message = f"duplicate route name {route.name!r} (also routes[{first[route.name]}])"
            read.problems.add((*path, i, "name"), message)
        first.setdefault(route.name, i)
        if catch_all is not None:
            message = f"unreachable: routes[{catch_all}] has no match and takes every request"
            read.problems.add((*path, i), message + "; a route without match must be last")
        elif route.match.matches_all:
            catch_all = i
        routes.append(route)
    return routes


ROUTE_KEYS = ("name", "match", "upstream", "policy", "allow_policy_header", "mode")


def _route(
    read: Reader, item: object, path: KeyPath, declared_names: Mapping[str, set[str]]
) -> Route | None:
    data = read.mapping(item, path, ROUTE_KEYS)
    if data is None:
        return None
    read.require(data, ("name", "upstream", "policy"), path)
    refs = {key: read.get(data, key, path, "", v.text) for key in ("upstream", "policy")}
    for key, ref in refs.items():
        declared = declared_names[key]
        if ref and ref not in declared:
            defined = ", ".join(sorted(declared)) or "none"
            message = f"unknown {key} {ref!r}{suggest(ref, declared)} (defined: {defined})"
            read.problems.add((*path, key), message)
    return Route(
        name=read.get(data, "name", path, f"routes[{path[-1]}]", v.text),
        upstream=refs["upstream"],
        policy=refs["policy"],
        match=_match(read, data.get("match"), (*path, "match")),
        allow_policy_header=read.get(data, "allow_policy_header", path, False, v.boolean),
        mode=_mode(read, data, path),
    )


def _mode(read: Reader, data: Mapping[str, Any], path: KeyPath) -> Mode:
    # YAML 1.1 reads a bare `off` as false, and `mode: off` is what the operator wrote.
    value = "off" if data.get("mode") is False else data.get("mode", "enforce")
    mode: Mode = read.get({"mode": value}, "mode", path, "enforce", v.one_of(*MODES))
    return mode


def _match(read: Reader, value: object, path: KeyPath) -> RouteMatch:
    data = read.mapping(value, path, ("path", "model", "headers")) if value is not None else None
    if data is None:
        return RouteMatch()
    headers: list[tuple[str, str]] = []
    if "headers" in data:
        for name, glob, item_path in read.named(data["headers"], (*path, "headers")):
            if not isinstance(glob, str):
                read.problems.add(item_path, f"expected a string (a glob), got {describe(glob)}")
            elif (problem := v.glob_problem(glob)) is not None:
                message = f"expected a glob that can match: {problem}, got {describe(glob)}"
                read.problems.add(item_path, message)
            else:
                headers.append((name.lower(), glob))
    return RouteMatch(
        path=read.get(data, "path", path, None, v.glob),
        model=read.get(data, "model", path, None, v.glob),
        headers=tuple(headers),
    )
