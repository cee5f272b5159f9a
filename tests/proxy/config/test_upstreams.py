"""The `upstreams:` section (upstreams.py): each mistake named with its file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.config.configs import MINIMAL, assert_one_problem

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
