"""Globs that can never match what they name are config errors, with file:line: key.path."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.errors import ConfigError
from proxy.cli.main import main
from proxy.config.loader import load_config
from proxy.serving.routing import select_route

UPSTREAMS = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1"}
policies:
  off: preset:passthrough
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(UPSTREAMS + text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return [str(p).removeprefix(f"{tmp_path}/") for p in info.value.problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'routes:\n  - {name: a, upstream: openai, policy: "off", match: {model: "gpt-4o["}}\n',
            "config.yaml:6: routes[0].match.model: expected a glob that can match: '[' at "
            "character 7 is never closed (write [[] for a literal '['), got a string 'gpt-4o['",
        ),
        (
            "routes:\n  - name: a\n    upstream: openai\n    policy: 'off'\n"
            "    match: {headers: {x-team: '[a'}}\n",
            "config.yaml:9: routes[0].match.headers.x-team: expected a glob that can match: "
            "'[' at character 1 is never closed (write [[] for a literal '['), got a string '[a'",
        ),
        (
            'routes:\n  - {name: a, upstream: openai, policy: "off", match: {path: "/v1/[z-a]"}}\n',
            "config.yaml:6: routes[0].match.path: expected a glob that can match: '[z-a]' "
            "matches no character (a range runs backwards), got a string '/v1/[z-a]'",
        ),
        (
            'routes:\n  - {name: a, upstream: openai, policy: "off"}\n'
            "models:\n  'llama-3[':\n    context_window: 8192\n",
            "config.yaml:8: models.llama-3[: model glob 'llama-3[' can never match: '[' at "
            "character 8 is never closed (write [[] for a literal '[')",
        ),
    ],
)
def test_a_glob_that_cannot_match_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    assert problems(tmp_path, text) == [expected]


@pytest.mark.parametrize(
    ("glob", "model"),
    [("gpt-4o*", "gpt-4o-mini"), ("gpt-[0-9]*", "gpt-5"), ("[[]x", "[x"), ("a[]]", "a]")],
)
def test_globs_that_can_match_load_and_route(tmp_path: Path, glob: str, model: str) -> None:
    path = tmp_path / "config.yaml"
    match = f"match: {{model: '{glob}'}}"
    route = f"routes:\n  - {{name: a, upstream: openai, policy: 'off', {match}}}\n"
    path.write_text(UPSTREAMS + route + f"models:\n  '{glob}': {{context_window: 10}}\n")
    config = load_config(path, environ={})
    assert select_route(config.routes, "/v1/chat/completions", model, {}) is config.routes[0]
    assert config.models.lookup(model).context_window == 10


def test_check_reports_the_glob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    route = "routes:\n  - {name: a, upstream: openai, policy: 'off', match: {model: 'gpt-4o['}}\n"
    path.write_text(UPSTREAMS + route)
    assert main(["check", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:6: routes[0].match.model: expected a glob that can match" in err
