"""Checks of the deployment files (Dockerfile, compose, Kubernetes, Grafana), run offline.

No container engine or cluster is available to the tests, so the files are parsed and checked
against schemas, against each other and against the CLI they start.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dockerfile
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"


@dataclass(frozen=True)
class Family:
    """One metric family from deploy/metrics.txt."""

    name: str
    type: str
    labels: Mapping[str, frozenset[str] | None]
    """Label name -> its closed set of values, or None when any value may occur."""


@functools.cache
def metric_families() -> dict[str, Family]:
    """deploy/metrics.txt, keyed by family name."""
    text = (DEPLOY / "metrics.txt").read_text()
    families: dict[str, Family] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, kind, *rest = line.split()
        labels: dict[str, frozenset[str] | None] = {}
        for spec in rest[0].split(",") if rest else []:
            label, _, values = spec.partition("=")
            labels[label] = frozenset(values.split("|")) if values else None
        assert name not in families, f"{name} listed twice"
        families[name] = Family(name, kind, labels)
    return families


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@functools.cache
def compose() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEPLOY / "docker-compose.yml")
    return data


@functools.cache
def k8s_objects() -> dict[str, dict[str, Any]]:
    """Every Kubernetes object under deploy/k8s, keyed by kind (each kind occurs once)."""
    objects: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] not in objects, f"{path.name}: a second {doc['kind']}"
            objects[doc["kind"]] = doc
    return objects


def k8s_config() -> dict[str, Any]:
    """The proxy config carried by the Kubernetes ConfigMap."""
    data: dict[str, Any] = yaml.safe_load(k8s_objects()["ConfigMap"]["data"]["config.yaml"])
    return data


def curator_container() -> dict[str, Any]:
    (container,) = k8s_objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = container
    return result


@functools.cache
def dockerfile_stages() -> list[list[dockerfile.Command]]:
    """The Dockerfile's instructions, one list per build stage (instructions before the first
    FROM, i.e. global ARGs, are dropped)."""
    stages: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(REPO / "Dockerfile")):
        if command.cmd == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(command)
    return stages


def instructions(stage: list[dockerfile.Command], name: str) -> list[dockerfile.Command]:
    return [c for c in stage if c.cmd == name]


def dockerfile_env(stage: list[dockerfile.Command]) -> dict[str, str]:
    env: dict[str, str] = {}
    for command in instructions(stage, "ENV"):
        pairs = command.value
        env.update(zip(pairs[::2], pairs[1::2], strict=True))
    return env


def mounts(service: Mapping[str, Any]) -> dict[str, tuple[str, bool]]:
    """A compose service's volumes in short syntax: container path -> (source, read_only)."""
    found: dict[str, tuple[str, bool]] = {}
    for spec in service.get("volumes", []):
        source, target, *options = spec.split(":")
        found[target] = (source, "ro" in options)
    return found


def flag_value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def url_parts(url: str) -> tuple[str, int, str]:
    """(host, port, path) of an http URL that names its port."""
    match = re.fullmatch(r"https?://([^/:]+):(\d+)(/.*)?", url)
    assert match, url
    return match.group(1), int(match.group(2)), match.group(3) or "/"
