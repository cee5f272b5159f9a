"""The `upstreams:` section (upstreams.py): each mistake named with its file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli.main import main
from proxy.config.upstreams import UpstreamConfig
from tests.proxy.config.configs import MINIMAL, assert_one_problem, load, write

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
        MINIMAL.replace("https://api", "https://team:pw@api").replace(
            "}\npolicies", ", api_key: k}\npolicies"
        ),
        "config.yaml:2: upstreams.openai.api_key: set together with user:password in base_url",
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


@pytest.mark.parametrize(
    ("base_url", "api_key", "warned"),
    [
        ("http://10.0.0.5:8000/v1", "sk-internal", "api_key"),
        ("http://team:pw@gateway.internal/v1", None, "URL credentials"),
        ("http://gateway.internal/v1", None, None),  # no key of ours goes
        ("https://gateway.internal/v1", "sk-internal", None),
        ("http://127.0.0.1:8000/v1", "sk-internal", None),
        ("http://localhost:8000/v1", "sk-internal", None),
        ("http://[::1]:8000/v1", "sk-internal", None),
    ],
)
def test_check_warns_of_a_key_sent_in_clear_text(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    base_url: str,
    api_key: str | None,
    warned: str | None,
) -> None:
    key = f", api_key: {api_key}" if api_key else ""
    text = MINIMAL.replace('"https://api.openai.com/v1"}', f'"{base_url}"{key}}}')
    assert main(["check", "--config", str(write(tmp_path, text))]) == 0
    _, err = capsys.readouterr()
    if warned is None:
        assert "warning" not in err
        return
    host = UpstreamConfig("openai", base_url).base_url.split("//")[1].split(":")[0].split("/")[0]
    assert err.strip() == (
        f"warning: upstream 'openai' sends its {warned} in clear text over http:// to {host}, "
        "which is not loopback: anyone on the path can read it; use https://"
    )
