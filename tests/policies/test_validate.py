"""`glob_problem`: which fnmatch globs cannot mean what they say."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.validate import glob, glob_problem


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("gpt-4o[", "'[' at character 7 is never closed (write [[] for a literal '[')"),
        ("[a", "'[' at character 1 is never closed (write [[] for a literal '[')"),
        ("[]", "'[' at character 1 is never closed (write [[] for a literal '[')"),
        ("[!]", "'[' at character 1 is never closed (write [[] for a literal '[')"),
        ("a[b-c]d[", "'[' at character 8 is never closed (write [[] for a literal '[')"),
        ("[z-a]", "'[z-a]' matches no character (a range runs backwards)"),
        ("x[b-a]y", "'[b-a]' matches no character (a range runs backwards)"),
    ],
)
def test_globs_that_cannot_match(pattern: str, problem: str) -> None:
    assert glob_problem(pattern) == problem


@pytest.mark.parametrize("pattern", ["gpt-4o*", "a[]]", "[!]]", "[a-]", "[[]", "a]", "[!a-z]", "?"])
def test_globs_that_can_match(pattern: str) -> None:
    assert glob_problem(pattern) is None


def test_glob_check_wants_a_non_empty_string() -> None:
    assert glob("") == "expected a non-empty string"
    assert glob(3) == "expected a non-empty string"
    assert glob("gpt-[") is not None
    assert glob("gpt-*") is None


@given(st.text(alphabet="ab[]!-*?", max_size=8))
def test_the_verdict_agrees_with_fnmatch(pattern: str) -> None:
    """Accepted: no class that matches nothing. Unclosed: fnmatch takes the '[' literally."""
    translated = fnmatch.translate(pattern)
    problem = glob_problem(pattern)
    if problem is None:
        assert "(?!)" not in translated
    elif "never closed" in problem:
        assert "\\[" in translated
    else:
        assert "(?!)" in translated


def test_the_builtin_model_globs_can_all_match() -> None:
    from policies.models import BUILTIN

    assert [p for p, _ in BUILTIN if glob_problem(p) is not None] == []
