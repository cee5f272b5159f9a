"""Start a shipped deployment's `curator serve` as its instructions say, without a container.

The container's environment comes from the compose file (interpolated from the variables its
instructions export) or from the Deployment's `env` (Secrets rendered as the kubelet does). The
process runs in a private network namespace, so it listens on the image's own 0.0.0.0:8080 and
reaches nothing but the namespace's loopback. The only liberty taken: the container's mount
points (/etc/curator, /data) are folders under a temporary directory, so those paths are
rewritten in the command line and the config file.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy import REPO, dockerfile_stages, instructions

UPSTREAM_PORT = 9000
"""Where the fake upstream listens inside the namespace."""
FAKE_UPSTREAM = f"http://127.0.0.1:{UPSTREAM_PORT}/v1"
LEAVE_OUT = ("OPENAI_", "CURATOR_")
"""The test's own environment minus these: only the deployment decides them."""

_COMPOSE_VAR = re.compile(
    r"\$(?:(?P<escaped>\$)|(?P<named>[A-Za-z_]\w*)|\{(?P<braced>[A-Za-z_]\w*)"
    r"(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<invalid>))"
)


class ComposeError(ValueError):
    """What `docker compose` refuses the file with (a required variable unset, a bad `$`)."""


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's variable interpolation of one string (`$$`, `${V}`, `${V:-d}`, `${V:?e}`)."""

    def expand(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        if match["invalid"] is not None:
            raise ComposeError(f"invalid interpolation format in {value!r}")
        name = match["named"] or match["braced"]
        op, arg = match["op"], match["arg"] or ""
        found = env.get(name)
        unset = found is None or (op is not None and op.startswith(":") and not found)
        if op is not None and op.endswith("?") and unset:
            raise ComposeError(f"required variable {name} is missing a value: {arg}")
        if op is not None and op.endswith("-") and unset:
            return arg
        return found or ""

    return _COMPOSE_VAR.sub(expand, value)


def compose_environment(service: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """A compose service's `environment:` mapping as the container sees it."""
    return {name: interpolate(str(value), env) for name, value in service["environment"].items()}


class MissingSecret(LookupError):
    """The kubelet does not start the container: a required Secret key does not exist."""


def kubernetes_environment(
    container: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """A container's `env:` as the kubelet renders it from literal values and Secrets."""
    rendered: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            rendered[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        value = secrets.get(ref["name"], {}).get(ref["key"])
        if value is not None:
            rendered[item["name"]] = value
        elif not ref.get("optional", False):
            raise MissingSecret(f'secret "{ref["name"]}" key {ref["key"]!r} not found')
    return rendered


def image_command() -> list[str]:
    """ENTRYPOINT + CMD of the image's runtime stage."""
    stage = dockerfile_stages()[-1]
    (entrypoint,) = instructions(stage, "ENTRYPOINT")
    (cmd,) = instructions(stage, "CMD")
    return [*entrypoint.value, *cmd.value]


def image_workdir() -> str:
    workdirs = instructions(dockerfile_stages()[-1], "WORKDIR")
    return str(workdirs[-1].value[0])


@dataclass
class Container:
    """A container's file system as folders under `root`: mount target -> host folder."""

    root: Path

    def path(self, target: str) -> Path:
        return self.root / target.lstrip("/")

    def mount(self, target: str, source: Path) -> None:
        place = self.path(target)
        place.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, place)
        else:
            shutil.copyfile(source, place)

    def rewrite(self, text: str) -> str:
        """Container paths in `text` (the mount points used here) -> host paths."""
        for target in ("/etc/curator", "/data"):
            text = re.sub(rf"(?<![\w/]){re.escape(target)}(?=/|\b)", str(self.path(target)), text)
        return text


def curator() -> str:
    return str(Path(sys.executable).parent / "curator")


@functools.cache
def netns_prefix() -> tuple[str, ...] | None:
    """The `unshare` invocation giving a private network namespace here, or None."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    candidates = [("unshare", "--net")] if os.geteuid() == 0 else []
    candidates.append(("unshare", "--user", "--map-root-user", "--net"))
    for prefix in candidates:
        probe = [*prefix, "ip", "link", "set", "lo", "up"]
        if subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0:
            return prefix
    return None


def start_in_netns(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Run `tests.deploy.netns_serve` with `spec` in a private network namespace."""
    prefix = netns_prefix()
    assert prefix is not None
    command = [*prefix, sys.executable, "-m", "tests.deploy.netns_serve"]
    done = subprocess.run(
        command,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def base_environment() -> dict[str, str]:
    """This process's environment without the variables a deployment sets."""
    return {k: v for k, v in os.environ.items() if not k.startswith(LEAVE_OUT)}
