"""`python -m build` makes a wheel that installs in a fresh venv and serves.

The wheel is built from a copy of what the Dockerfile builds it from (pyproject.toml,
README.md, policies/, proxy/), without build isolation so no index is needed. It goes into
a new venv with `--no-deps --no-index`; the venv finds the dependencies through a .pth
line naming this environment's site-packages. A directory named that way is only appended
to sys.path, its own .pth files are not run, so this checkout's editable install stays out
and `proxy` is imported from the wheel (checked below).
"""

from __future__ import annotations

import os
import shutil
import site
import socket
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("build", reason="the test extra's `build` is not installed")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("policies", "proxy")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
START_S = 60.0
"""Bound for `curator serve` to answer /healthz (tokenizers load first); not a speed check."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run([*install, "--no-deps", "--no-index", str(wheel)], check=True)
    (purelib,) = root.glob("lib/python*/site-packages")
    (purelib / "test-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return root


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty folder: no ./config.yaml, so `curator` takes its built-in defaults."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CURATOR_UPSTREAM")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _run(venv: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=workdir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_holds_every_file_of_both_packages(wheel: Path) -> None:
    """Package data included: presets, py.typed, the viewer's static files."""
    assert wheel.name.startswith(f"context_curator-{VERSION}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert path.relative_to(ROOT).as_posix() in names
    assert "policies/presets/default.yaml" in names


def test_the_installed_wheel_is_what_runs(venv: Path, workdir: Path) -> None:
    shown = _run(venv, workdir, "python", "-c", "import proxy, policies; print(proxy.__file__)")
    assert shown.returncode == 0, shown.stderr
    assert Path(shown.stdout.strip()).is_relative_to(venv), shown.stdout
    version = _run(venv, workdir, "curator", "--version")
    assert (version.returncode, version.stdout) == (0, f"curator {VERSION}\n")


def test_check_passes_with_the_embedded_defaults(venv: Path, workdir: Path) -> None:
    checked = _run(venv, workdir, "curator", "check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("config: <defaults>: OK\n")
    assert "policy: default" in checked.stdout  # the preset, read from the wheel's YAML
    assert "- token_budget:" in checked.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def served(venv: Path, workdir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()
    command = [str(venv / "bin" / "curator"), "serve", "--port", str(port)]
    with subprocess.Popen(
        command, cwd=workdir, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        try:
            yield proc, port
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.e2e
def test_serve_answers_healthz(served: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, port = served
    deadline = time.monotonic() + START_S
    with httpx.Client(trust_env=False, timeout=5) as client:
        while True:
            assert proc.poll() is None, "curator serve exited early"
            try:
                response = client.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "curator serve never answered"
                time.sleep(0.1)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    proc.terminate()
    assert proc.wait(timeout=30) == 0
