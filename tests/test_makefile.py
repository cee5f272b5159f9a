"""`make run` installs what serving needs, as the Docker image does; `make test` adds the
`test`, `docs` and `recipes` extras. Read from `make -n` (nothing is run) into a venv path that does
not exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _installed_extras(target: str, venv: Path) -> list[set[str]]:
    """The extras of each `pip install -e '.[...]'` that `make target` would run."""
    out = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", out)
    return [set(extras.split(",")) for extras in found]


def _image_extras() -> set[str]:
    match = re.search(r'pip install "\$\(ls /wheels/\*\.whl\)\[([^\]]*)\]"', _dockerfile())
    assert match, "the Dockerfile's wheel install line moved: update this test"
    return set(match.group(1).split(","))


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_make_run_installs_only_what_the_image_serves_with(tmp_path: Path) -> None:
    assert _installed_extras("run", tmp_path / "venv") == [_image_extras()]
    assert "test" not in _image_extras()


def test_make_test_installs_the_test_extra_too(tmp_path: Path) -> None:
    extras = [_image_extras() | {"test", "docs", "recipes"}]
    assert _installed_extras("test", tmp_path / "venv") == extras
