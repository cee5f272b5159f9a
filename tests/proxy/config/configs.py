"""Config texts and loaders the config tests share."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from policies.errors import ConfigError
from proxy.config.loader import Config, load_config

MINIMAL = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1"}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: openai, policy: "off"}
"""


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    return load_config(write(tmp_path, text), environ=env or {})


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    prefix = f"{tmp_path}/"
    return [str(p).removeprefix(prefix) for p in info.value.problems]


def assert_one_problem(tmp_path: Path, text: str, expected: str) -> None:
    """Loading `text` fails with exactly one problem, which starts with `expected`."""
    found = problems(tmp_path, text)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found
