"""The image's entrypoint, run here: `curator` with the image's flags and the shipped configs."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from proxy.config.audit import parse_audit
from tests.deploy import (
    DEPLOY,
    dockerfile_stages,
    instructions,
    k8s_config,
    k8s_objects,
    load_yaml,
)

SENTINEL_KEY = "sk-deploy-test-0123456789abcdef"
PROXY_KEY = "proxy-deploy-test-0123456789abcdef"


def curator() -> Path:
    script = Path(sys.executable).parent / "curator"
    assert script.is_file(), "the `curator` console script is not installed (pip install -e .)"
    return script


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # What the deployments' instructions set: the upstream key and the proxy key.
    env = {**os.environ, "OPENAI_API_KEY": SENTINEL_KEY, "CURATOR_PROXY_KEY": PROXY_KEY}
    return subprocess.run(
        [str(curator()), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=env,
    )


def docker_config() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEPLOY / "config.docker.yaml")
    return data


def image_cmd() -> list[str]:
    (cmd,) = instructions(dockerfile_stages()[-1], "CMD")
    return list(cmd.value)


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout
    assert "check" in result.stdout


def test_serve_accepts_every_flag_of_the_image_cmd() -> None:
    command, *args = image_cmd()
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    for flag in (a for a in args if a.startswith("--")):
        assert re.search(rf"{flag}\b", result.stdout), flag


def test_check_accepts_the_docker_config() -> None:
    result = run("check", "--config", str(DEPLOY / "config.docker.yaml"))
    assert result.returncode == 0, result.stderr
    assert "agents" in result.stdout
    assert SENTINEL_KEY not in result.stdout + result.stderr
    assert PROXY_KEY not in result.stdout + result.stderr


def test_check_accepts_the_kubernetes_configmap(tmp_path: Path) -> None:
    # Laid out as the ConfigMap volume is: every key a file in one folder.
    for name, text in k8s_objects()["ConfigMap"]["data"].items():
        (tmp_path / name).write_text(text)
    result = run("check", "--config", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "agents" in result.stdout
    assert SENTINEL_KEY not in result.stdout + result.stderr
    assert PROXY_KEY not in result.stdout + result.stderr


def test_check_rejects_a_broken_config(tmp_path: Path) -> None:
    """The two tests above would pass vacuously if `check` accepted anything."""
    broken = (DEPLOY / "config.docker.yaml").read_text().replace("upstream: openai", "upstream: x")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "agents.yaml").write_text(
        (DEPLOY / "policies" / "agents.yaml").read_text()
    )
    (tmp_path / "config.yaml").write_text(broken)
    result = run("check", "--config", str(tmp_path / "config.yaml"))
    assert result.returncode == 1
    assert "routes[0].upstream" in result.stderr


@pytest.mark.parametrize("where", ["docker", "kubernetes"])
def test_audit_sections_parse(where: str) -> None:
    config = docker_config() if where == "docker" else k8s_config()
    file = str(DEPLOY / "config.docker.yaml") if where == "docker" else "/etc/curator/config.yaml"
    audit = parse_audit(config["audit"], file=file, lines={})
    assert audit.enabled
    assert audit.redact.builtin
    if where == "docker":
        assert (audit.sink, audit.path) == ("sqlite", "/data/curator-audit.db")
    else:
        assert (audit.sink, audit.path) == ("jsonl", "-")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def healthcheck(snippet: str, port: int) -> int:
    code = snippet.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30).returncode


@pytest.mark.e2e
def test_image_healthcheck_tells_a_serving_proxy_from_a_stopped_one(tmp_path: Path) -> None:
    (check,) = instructions(dockerfile_stages()[-1], "HEALTHCHECK")
    snippet = check.value[3]
    assert "127.0.0.1:8080" in snippet
    port = free_port()
    # No config file in the folder: `serve` runs on built-in defaults, enough for /healthz.
    server = subprocess.Popen(
        [str(curator()), "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Bounded wait for startup; what is asserted is the outcome, not how fast it came.
        results = []
        for _ in range(120):
            results.append(healthcheck(snippet, port))
            if results[-1] == 0 or server.poll() is not None:
                break
            time.sleep(0.25)
        assert results[-1] == 0, f"never healthy; server exit code {server.poll()}"
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert healthcheck(snippet, port) != 0
