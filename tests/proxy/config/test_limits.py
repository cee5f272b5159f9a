"""The `server:` section's limits (limits.py): each mistake named with its file, line, key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.config.configs import MINIMAL, assert_one_problem

ERRORS = [
    ("server: [1]\n" + MINIMAL, "config.yaml:1: server: expected a mapping, got a list"),
    ("server: {port: 0}\n" + MINIMAL, "config.yaml:1: server.port: expected an integer from 1"),
    ("server:\n  port: 70000\n" + MINIMAL, "config.yaml:2: server.port: expected an integer from"),
    ("server:\n  port: x\n" + MINIMAL, "config.yaml:2: server.port: expected an integer from 1"),
    ("server:\n  workers: 0\n" + MINIMAL, "config.yaml:2: server.workers: expected an integer >="),
    ("server:\n  hots: x\n" + MINIMAL, "config.yaml:2: server.hots: unknown key 'hots'; did you"),
    ("server: {}\nserver: {}\n" + MINIMAL, "config.yaml:2: server: duplicate key 'server' (first"),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_has_file_line_and_key_path(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_problem(tmp_path, text, expected)
