"""Typed reads of parsed YAML that report problems with their key path instead of raising.

Loaders read values through a `Reader`, so every problem in a file is collected (one per
key path) and raised together: an operator fixes a config in one pass.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from policies.errors import ConfigError, Problem
from policies.urls import mask_urls
from policies.yamlsrc import WHOLE_FILE, Hidden, KeyPath, format_path, line_of

T = TypeVar("T")
Check = Callable[[Any], str | None]
"""Returns None for a valid value, else what was expected (e.g. "expected an integer >= 1")."""


def suggest(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _longest_first(item: tuple[KeyPath, tuple[object, str]]) -> int:
    return -len(str(item[1][0]))


SECRET_MIN_CHARS = 8
"""A hidden string this long is left out of every message, not only its own key's."""


def unquoted(message: str, value: object, name: str) -> str:
    """`message` with `value` (as `describe`, `repr` or `str` show it) said as `name`."""
    instead = "the file's text (not shown)" if name == WHOLE_FILE else f"{name} (not shown)"
    if value is None or isinstance(value, bool):
        return message
    message = message.replace(describe(value), f"{_kind(value)} from {instead}")
    for shown in (repr(value), str(value)):
        if len(shown) >= 4:
            message = message.replace(shown, instead)
    return message


def _kind(value: object) -> str:
    kinds = {str: "a string", int: "an integer", float: "a number"}
    return kinds.get(type(value), "a value")


def describe(value: object) -> str:
    """A value as an error message shows it: its kind, and the value itself when short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(mask_urls(value) if isinstance(value, str) else value)  # no URL credentials
    if len(text) > 60:
        text = text[:57] + "..."
    kinds = {str: "a string", int: "an integer", float: "a number"}
    return f"{kinds.get(type(value), type(value).__name__)} {text}"


@dataclass(slots=True)
class Problems:
    """Collects problems for one file; keeps only the first problem per key path.

    One per path avoids follow-on noise, e.g. an unset `${VAR}` in `base_url` also being
    reported as "not an http(s) URL". A message never quotes a value of `hidden`
    (`Located.hidden`: what came from the environment, a one-scalar file's text): it
    names the variable or the file instead.
    """

    file: str
    lines: Mapping[KeyPath, int]
    hidden: Hidden = field(default_factory=dict)
    items: list[Problem] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, path: KeyPath, message: str) -> None:
        where = format_path(path)
        if where in self._seen:
            return
        self._seen.add(where)
        message = self._unquoted(path, message)
        self.items.append(Problem(self.file, line_of(self.lines, path), where, message))

    def _unquoted(self, path: KeyPath, message: str) -> str:
        # Longest first: a value that holds another is said whole.
        for at, (value, name) in sorted(self.hidden.items(), key=_longest_first):
            near = at[: len(path)] == path or path[: len(at)] == at
            if near or (isinstance(value, str) and len(value) >= SECRET_MIN_CHARS):
                message = unquoted(message, value, name)
        return message

    def unknown_keys(self, data: Mapping[Any, Any], allowed: Iterable[str], path: KeyPath) -> None:
        """Report every key of `data` not in `allowed`, with the closest allowed one."""
        choices = list(allowed)
        for key in data:
            if key not in choices:
                self.add((*path, key), f"unknown key {key!r}{suggest(str(key), choices)}")

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            if problem.file == self.file:
                self._seen.add(problem.path)
            self.items.append(problem)

    def raise_if_any(self) -> None:
        """Raise every problem at once: this file's first, in line order, then other files'."""
        if self.items:
            files = list(dict.fromkeys([self.file, *(p.file for p in self.items)]))
            order = sorted(self.items, key=lambda p: (files.index(p.file), p.line or 0))
            raise ConfigError(order)


@dataclass(frozen=True, slots=True)
class Reader:
    """Reads values out of parsed YAML, reporting each bad one to `problems`."""

    problems: Problems

    def mapping(
        self, value: object, path: KeyPath, allowed: Iterable[str] | None = None
    ) -> Mapping[Any, Any] | None:
        """`value` if it is a mapping (unknown keys reported when `allowed` is given)."""
        if not isinstance(value, Mapping):
            self.problems.add(path, f"expected a mapping, got {describe(value)}")
            return None
        if allowed is not None:
            self.problems.unknown_keys(value, allowed, path)
        return value

    def get(self, data: Mapping[Any, Any], key: str, path: KeyPath, default: T, check: Check) -> T:
        """`data[key]` if it passes `check`; `default` if absent or (reported) invalid."""
        if key not in data:
            return default
        value = data[key]
        error = check(value)
        if error is not None:
            self.problems.add((*path, key), f"{error}, got {describe(value)}")
            return default
        result: T = value
        return result

    def require(self, data: Mapping[Any, Any], keys: Iterable[str], path: KeyPath) -> None:
        # One problem for all of them: problems are kept one per path.
        missing = [key for key in keys if key not in data]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            names = ", ".join(repr(key) for key in missing)
            self.problems.add(path, f"missing required key{plural} {names}")

    def globs(self, value: object, path: KeyPath) -> list[tuple[str, Any, KeyPath]]:
        """`named` for a mapping keyed by model-name globs: a glob that can never match is
        reported and left out."""
        out = []
        for glob, item, item_path in self.named(value, path):
            problem = glob_problem(glob)
            if problem is None:
                out.append((glob, item, item_path))
            else:
                self.problems.add(item_path, f"model glob {glob!r} can never match: {problem}")
        return out

    def named(self, value: object, path: KeyPath) -> list[tuple[str, Any, KeyPath]]:
        """(name, value, path) for each entry of a `name: ...` mapping with a string name."""
        items = self.mapping(value, path)
        out: list[tuple[str, Any, KeyPath]] = []
        for name, item in (items or {}).items():
            if isinstance(name, str) and name:
                out.append((name, item, (*path, name)))
            else:
                self.problems.add((*path, name), f"expected a non-empty name, got {describe(name)}")
        return out


def int_in(low: int, high: int | None = None) -> Check:
    """Accepts ints (never bools: YAML's `yes` is not a count) in [low, high]."""
    bound = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"

    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok and low <= value and (high is None or value <= high)
        return None if ok else f"expected {bound}"

    return check


def positive_number(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return None if ok else "expected a number > 0"


def text(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "expected a non-empty string"


def optional_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "expected a string or null"


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"expected {' | '.join(choices)}"

    return check


def glob_problem(pattern: str) -> str | None:
    """Why fnmatch `pattern` cannot mean what was written, or None.

    fnmatch reads an unclosed `[` as a literal `[` and a class like `[z-a]` as matching
    nothing, so such a glob silently never matches the names it was written for.
    """
    i = pattern.find("[")
    while i >= 0:
        j = i + 1
        if pattern[j : j + 1] == "!":
            j += 1
        if pattern[j : j + 1] == "]":
            j += 1  # a `]` first in the class is one of its characters
        end = pattern.find("]", j)
        if end < 0:
            return f"'[' at character {i + 1} is never closed (write [[] for a literal '[')"
        if "(?!)" in fnmatch.translate(pattern[i : end + 1]):
            return f"{pattern[i : end + 1]!r} matches no character (a range runs backwards)"
        i = pattern.find("[", end + 1)
    return None


def glob(value: Any) -> str | None:
    """A non-empty fnmatch glob that can match something (see `glob_problem`)."""
    if not isinstance(value, str) or not value:
        return "expected a non-empty string"
    problem = glob_problem(value)
    return None if problem is None else f"expected a glob that can match: {problem}"
