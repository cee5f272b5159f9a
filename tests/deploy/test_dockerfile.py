"""The Dockerfile and .dockerignore, checked structurally (no container engine here)."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy import (
    REPO,
    dockerfile_env,
    dockerfile_stages,
    instructions,
)

ENCODINGS = ("cl100k_base", "o200k_base")


def base_images() -> list[str]:
    defaults = {}
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if match := re.fullmatch(r"ARG (\w+)=(\S+)", line.strip()):
            defaults[match.group(1)] = match.group(2)
    images = []
    for stage in dockerfile_stages():
        image = stage[0].value[0]
        images.append(re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], image))
    return images


def prefetch_command() -> str:
    """The build-stage RUN step that downloads tiktoken's BPE files."""
    (command,) = [
        c for c in instructions(dockerfile_stages()[0], "RUN") if "tiktoken" in c.value[0]
    ]
    return str(command.value[0])


def dockerignore_patterns() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps `path` (or a folder above it) out of the build context.

    Covers the pattern forms the file uses: plain paths and globs from the context root, and
    `**/name` for a name at any depth. Negations are not modelled, so none may be used."""
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in dockerignore_patterns():
        assert not pattern.startswith("!"), pattern
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts):
                return True
        elif any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            return True
    return False


def test_multi_stage_on_slim_python_311() -> None:
    images = base_images()
    assert len(images) >= 2
    for image in images:
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", image), image


def test_build_stage_builds_a_wheel_into_a_venv() -> None:
    script = " ".join(c.value[0] for c in instructions(dockerfile_stages()[0], "RUN"))
    assert "pip wheel" in script
    assert "python -m venv /opt/curator" in script


def test_runtime_copies_only_the_venv_from_the_build_stage() -> None:
    copies = instructions(dockerfile_stages()[-1], "COPY")
    assert [(c.flags, c.value) for c in copies] == [
        (("--from=build",), ("/opt/curator", "/opt/curator"))
    ]


def test_runs_as_a_numeric_non_root_user() -> None:
    (user,) = instructions(dockerfile_stages()[-1], "USER")
    uid, _, gid = user.value[0].partition(":")
    assert uid.isdigit(), "numeric, so Kubernetes can check runAsNonRoot"
    assert int(uid) >= 1000
    assert gid.isdigit()


def test_healthcheck_probes_healthz_with_python() -> None:
    (check,) = instructions(dockerfile_stages()[-1], "HEALTHCHECK")
    assert check.json
    assert check.value[:3] == ("CMD", "python", "-c")
    assert "http://127.0.0.1:8080/healthz" in check.value[3]
    assert "curl" not in " ".join(check.value)
    compile(check.value[3], "HEALTHCHECK", "exec")


def test_entrypoint_and_cmd_start_the_server() -> None:
    stage = dockerfile_stages()[-1]
    (entrypoint,) = instructions(stage, "ENTRYPOINT")
    (cmd,) = instructions(stage, "CMD")
    assert entrypoint.json
    assert entrypoint.value == ("curator",)
    assert cmd.json
    assert cmd.value[0] == "serve"
    assert cmd.value[cmd.value.index("--host") + 1] == "0.0.0.0"
    (expose,) = instructions(stage, "EXPOSE")
    assert cmd.value[cmd.value.index("--port") + 1] == expose.value[0] == "8080"


def test_tiktoken_files_are_fetched_at_build_and_found_at_run_time() -> None:
    build, runtime = dockerfile_stages()[0], dockerfile_stages()[-1]
    cache = dockerfile_env(build)["TIKTOKEN_CACHE_DIR"]
    assert dockerfile_env(runtime)["TIKTOKEN_CACHE_DIR"] == cache
    assert cache.startswith("/opt/curator/"), "inside the folder the runtime stage copies"
    command = prefetch_command()
    for encoding in ENCODINGS:
        assert encoding in command
    assert "tiktoken.get_encoding" in command


def test_runtime_writes_nothing_outside_data_and_tmp() -> None:
    env = dockerfile_env(dockerfile_stages()[-1])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/tmp"
    (workdir,) = instructions(dockerfile_stages()[-1], "WORKDIR")
    assert workdir.value == ("/data",)


def test_prefetch_step_builds_both_encodings_without_a_download(tmp_path: Path) -> None:
    """Runs the build step's Python here with an empty cache, so a typo in it fails now
    rather than in a docker build (the machine is offline: nothing can be downloaded)."""
    words = shlex.split(prefetch_command())
    python = "/opt/curator/bin/python"
    assert words[:4] == [python, "-m", "policies.bpe_files", "$TIKTOKEN_CACHE_DIR"]
    snippet = words[words.index("-c") + 1]
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    for step in (["-m", "policies.bpe_files", str(tmp_path)], ["-c", snippet]):
        result = subprocess.run(
            [sys.executable, *step],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        assert result.returncode == 0, result.stderr
    assert len(list(tmp_path.iterdir())) == len(ENCODINGS)


def test_copied_sources_exist_and_are_in_the_build_context() -> None:
    for command in instructions(dockerfile_stages()[0], "COPY"):
        for source in command.value[:-1]:
            assert (REPO / source).exists(), f"COPY {source}: missing from the repo"
            assert not ignored(source), f"COPY {source}: excluded by .dockerignore"


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        ".pytest_cache/v",
        ".mypy_cache/x",
        ".hypothesis/examples",
        "bench/results/a.json",
        "proxy/__pycache__/app.cpython-311.pyc",
        "curator-audit.db",
    ],
)
def test_dockerignore_excludes(path: str) -> None:
    assert ignored(path)


@pytest.mark.parametrize(
    "path", ["pyproject.toml", "README.md", "policies/base.py", "bench/run.py"]
)
def test_dockerignore_keeps(path: str) -> None:
    assert not ignored(path)
