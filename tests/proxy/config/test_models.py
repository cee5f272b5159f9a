"""The `models:` section (models.py): each mistake named with its file, line and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.config.configs import MINIMAL, assert_one_problem

ERRORS = [
    (
        MINIMAL + "models:\n  'x*': {context_window: 10, encoding: cl100k}\n",
        "config.yaml:8: models.x*.encoding: expected one of cl100k_base, gpt2, o200k_base, ",
    ),
    (MINIMAL + "models:\n  'x*': {encoding: gpt2}\n", "config.yaml:8: models.x*: missing required"),
    (
        MINIMAL + "models:\n  'x*':\n    context_window: 10\n    max_input_tokens: 20\n",
        "config.yaml:10: models.x*.max_input_tokens: must be <= context_window (10), got 20",
    ),
]


@pytest.mark.parametrize(("text", "expected"), ERRORS)
def test_error_has_file_line_and_key_path(tmp_path: Path, text: str, expected: str) -> None:
    assert_one_problem(tmp_path, text, expected)
