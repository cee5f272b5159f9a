"""The `upstreams:` section (upstreams.py): each mistake named with its file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.config.configs import MINIMAL, assert_one_problem, load

ERRORS = [
    (
        MINIMAL.replace('"https://api.openai.com/v1"', "ftp://x/v1"),
        "config.yaml:2: upstreams.openai.base_url: expected an http(s) URL with a host",
    ),
    (
        MINIMAL.replace('"https://api.openai.com/v1"', "https://"),
        "config.yaml:2: upstreams.openai.base_url: expected an http(s) URL with a host",
    ),
    (
        MINIMAL.replace('"https://api.openai.com/v1"', '"http://h/v1?x=1"'),
        "config.yaml:2: upstreams.openai.base_url: expected a URL without a query or fragment",
    ),
    (
        MINIMAL.replace('base_url: "https://api.openai.com/v1"', "api_key: k"),
        "config.yaml:2: upstreams.openai: missing required key 'base_url'",
    ),
    (
        MINIMAL.replace("}\npolicies", ", connect_timeout_s: 0}\npolicies"),
        "config.yaml:2: upstreams.openai.connect_timeout_s: expected a number > 0, got an integer",
    ),
    (
        MINIMAL.replace("}\npolicies", ", discover_models: maybe}\npolicies"),
        "config.yaml:2: upstreams.openai.discover_models: expected true or false, got a string",
    ),
    (
        MINIMAL.replace("}\npolicies", ", read_timeout_s: soon}\npolicies"),
        "config.yaml:2: upstreams.openai.read_timeout_s: expected a number > 0, got a string",
    ),
    (
        MINIMAL.replace("}\npolicies", ", api_key: 5}\npolicies"),
        "config.yaml:2: upstreams.openai.api_key: expected a string or null, got an integer 5",
    ),
    (
        MINIMAL.replace("}\npolicies", ", timeout: 5}\npolicies"),
        "config.yaml:2: upstreams.openai.timeout: unknown key 'timeout'",
    ),
    (
        MINIMAL.replace('{base_url: "https://api.openai.com/v1"}', "[1]"),
        "config.yaml:2: upstreams.openai: expected a mapping, got a list",
    ),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_has_file_line_and_key_path(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_problem(tmp_path, text, expected)


ANTHROPIC = """\
upstreams:
  claude: {kind: anthropic, api_key: sk-ant-x}
  mine: {kind: anthropic, base_url: "http://127.0.0.1:9/", discover_models: true}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: claude, policy: "off"}
"""


def test_an_anthropic_upstream_defaults_to_anthropics_api_without_v1(tmp_path: Path) -> None:
    config = load(tmp_path, ANTHROPIC)
    claude, mine = config.upstreams["claude"], config.upstreams["mine"]
    assert (claude.kind, claude.base_url) == ("anthropic", "https://api.anthropic.com")
    assert claude.api_base == "https://api.anthropic.com/v1"
    assert claude.discover_models is False  # its model list states no windows
    assert mine.api_base == "http://127.0.0.1:9/v1"
    assert mine.discover_models is True
    assert load(tmp_path, MINIMAL).upstreams["openai"].kind == "openai"


def test_an_unknown_kind_is_named(tmp_path: Path) -> None:
    text = MINIMAL.replace("}\npolicies", ", kind: gemini}\npolicies")
    assert_one_problem(
        tmp_path, text, "config.yaml:2: upstreams.openai.kind: expected openai | anthropic"
    )
