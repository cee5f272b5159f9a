"""The `routes:` section (routes.py): each mistake named with its file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.config.configs import MINIMAL, assert_one_problem

ERRORS = [
    (MINIMAL.split("routes:")[0] + "routes: []\n", "config.yaml:5: routes: at least one route is"),
    (MINIMAL.split("routes:")[0] + "routes: {}\n", "config.yaml:5: routes: expected a list of ro"),
    (
        MINIMAL.replace("upstream: openai", "upstream: opena"),
        "config.yaml:6: routes[0].upstream: unknown upstream 'opena'; did you mean 'openai'? "
        "(defined: openai)",
    ),
    (
        MINIMAL.replace('policy: "off"', "policy: chat"),
        "config.yaml:6: routes[0].policy: unknown policy 'chat' (defined: off)",
    ),
    (
        MINIMAL.replace('policy: "off"', "policy: off"),
        "config.yaml:6: routes[0].policy: expected a non-empty string, got a boolean (false)",
    ),
    (MINIMAL.replace("name: default, ", ""), "config.yaml:6: routes[0]: missing required key 'na"),
    (
        MINIMAL.replace("{name: default, upstream: openai, ", "{"),
        "config.yaml:6: routes[0]: missing required keys 'name', 'upstream'",
    ),
    (
        MINIMAL.replace("}\n", ", allow_policy_header: 'yes'}\n", 2).replace(
            "/v1\", allow_policy_header: 'yes'}", '/v1"}'
        ),
        "config.yaml:6: routes[0].allow_policy_header: expected true or false, got a string 'yes'",
    ),
    (
        MINIMAL.replace("name: default,", "name: default, match: {modle: x},"),
        "config.yaml:6: routes[0].match.modle: unknown key 'modle'; did you mean 'model'?",
    ),
    (
        MINIMAL.replace("name: default,", "name: default, match: {headers: {x-team: 1}},"),
        "config.yaml:6: routes[0].match.headers.x-team: expected a string (a glob), got an int",
    ),
    (
        MINIMAL.replace("name: default,", "name: default, match: {path: ''},"),
        "config.yaml:6: routes[0].match.path: expected a non-empty string, got a string ''",
    ),
    (
        MINIMAL.replace(
            "routes:\n", "routes:\n  - {name: all, upstream: openai, policy: off2}\n"
        ).replace("off: preset", "off2: preset:chat\n  off: preset"),
        "config.yaml:8: routes[1]: unreachable: routes[0] has no match and takes every request",
    ),
    (
        MINIMAL.replace("name: default,", "name: default, match: {model: y},")
        + "  - {name: default, upstream: openai, policy: 'off'}\n",
        "config.yaml:7: routes[1].name: duplicate route name 'default' (also routes[0])",
    ),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_has_file_line_and_key_path(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_problem(tmp_path, text, expected)
