"""What an agent's next step refers to, and whether a prompt still shows it.

The trajectory benchmark (`bench.trajectories`) asks, for every step of a real agent run:
of what the agent's *next* message names, how much was in the whole history it had, but
is missing from the curated prompt it was sent instead? The extractor is deliberately
plain, so anybody can check a figure by hand:

- The next message's text is its `content` plus, for each tool call, the call's name and
  its decoded JSON arguments (each string value, whatever the key: `command`, `path`,
  `old_str`, ...). Undecodable arguments are taken as they are.
- **Paths**: runs of `word/word...` (at least one slash, a word character after it), and
  bare file names with a common source or config extension (`setup.py`, `pom.xml`).
- **Identifiers**: words of at least 4 characters that look like code, not prose: with an
  underscore (`get_FOO_display`), an inner capital (`getDisplay`), or dotted
  (`models.Field`); keywords of a shell (`grep_`...) are not special-cased.
- **Line numbers**: numbers of 2 to 6 digits in the places agents put line numbers:
  `sed -n '120,140p'`, `view_range: [120, 140]`, `line 120`, `file.py:120`, `+120`
  (`head`/`tail`). A line number is present in a prompt when it stands there as a word.
- **Quoted strings**: each line of a string the agent quotes (between `'...'` or `"..."`
  in a command, or any string argument other than the command: `old_str`, `new_str`,
  `file_text`), stripped, of at least 8 characters.

A reference counts only when the whole history before the step contains it (otherwise
the agent made it up, or wrote it now: a new file name, new code), and it is *lost* when
the curated prompt does not. "Contains" is a plain substring test on the prompt's text,
which is every message's text content, the tool calls' names and their decoded argument
values, joined. A reference to a line number is looked up as a whole word.

**Edit-context lines** are the lines of the original files that the agent's final patch
removes or keeps as hunk context (`-` and ` ` lines), stripped, of at least 12
characters. At each step, each such line the whole history shows is either still shown by
the curated prompt or hidden: hidden lines are code the agent will edit, or edit next to,
that it can no longer see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_EXT = (
    "py|pyi|java|kt|scala|js|jsx|ts|tsx|go|rs|c|h|cc|cpp|hpp|cs|rb|php|pony|swift|m|"
    "xml|json|ya?ml|toml|cfg|ini|md|rst|txt|sh|gradle|properties|sql|html|css|lock"
)
_PATH = re.compile(rf"(?:[\w.@+-]*/)+[\w.@+-]*\w|\b[\w-]+\.(?:{_EXT})\b")
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_LINE_PLACES = (
    re.compile(r"sed\s+-n\s*['\"]?(\d{2,6})(?:\s*,\s*(\d{2,6}))?"),
    re.compile(r"view_range\W{0,4}\[\s*(\d{2,6})(?:\s*,\s*(-?\d{2,6}))?"),
    re.compile(r"\blines?\s+(\d{2,6})(?:\s*(?:-|to|,)\s*(\d{2,6}))?", re.IGNORECASE),
    re.compile(r"\.\w{1,10}:(\d{2,6})\b"),
    re.compile(r"\b(?:head|tail)\s+-n?\s*\+?(\d{2,6})"),
)
_QUOTED = re.compile(r"'([^'\n]{8,})'|\"((?:[^\"\\\n]|\\.){8,})\"")
MIN_QUOTED = 8
MIN_EDIT_LINE = 12


@dataclass(frozen=True, slots=True)
class References:
    """What one step names, by kind; each a set of strings to look up."""

    paths: frozenset[str]
    identifiers: frozenset[str]
    lines: frozenset[str]
    quoted: frozenset[str]

    def all(self) -> Iterable[tuple[str, str]]:
        """(kind, reference) pairs."""
        for kind in ("paths", "identifiers", "lines", "quoted"):
            for ref in sorted(getattr(self, kind)):
                yield kind, ref


def message_text(msg: Mapping[str, Any]) -> str:
    """A message's text as the benchmark reads it: content, tool names, decoded arguments."""
    parts: list[str] = []
    content = msg.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            parts.append(str(fn.get("name") or ""))
            parts.extend(_argument_strings(fn.get("arguments")))
    return "\n".join(parts)


def _argument_strings(arguments: object) -> list[str]:
    if not isinstance(arguments, str):
        return []
    try:
        value = json.loads(arguments)
    except ValueError:
        return [arguments]
    out: list[str] = []
    _strings(value, out)
    return out


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.append(str(value))


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(message_text(m) for m in messages)


def extract(msg: Mapping[str, Any]) -> References:
    """The references of one (assistant) message, as the module docstring defines them."""
    text = message_text(msg)
    paths = {p.rstrip(".") for p in _PATH.findall(text) if len(p) >= 3 and not p.startswith("//")}
    idents = {w for w in _IDENT.findall(text) if len(w) >= 4 and _codelike(w)}
    lines: set[str] = set()
    for place in _LINE_PLACES:
        for found in place.findall(text):
            groups = found if isinstance(found, tuple) else (found,)
            lines.update(g.lstrip("-") for g in groups if g and g.lstrip("-").isdigit())
    quoted: set[str] = set()
    for single, double in _QUOTED.findall(text):
        _quoted_lines(single or double.replace('\\"', '"'), quoted)
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        args = _decoded(fn.get("arguments")) if isinstance(fn, Mapping) else None
        if isinstance(args, Mapping):
            for key, value in args.items():
                if key != "command" and isinstance(value, str):
                    _quoted_lines(value, quoted)
    return References(frozenset(paths), frozenset(idents), frozenset(lines), frozenset(quoted))


def _codelike(word: str) -> bool:
    return "_" in word.strip("_") or "." in word or any(c.isupper() for c in word[1:])


def _quoted_lines(value: str, into: set[str]) -> None:
    for line in value.splitlines():
        line = line.strip()
        if len(line) >= MIN_QUOTED:
            into.add(line)


def _decoded(arguments: object) -> object:
    if not isinstance(arguments, str):
        return None
    try:
        return json.loads(arguments)
    except ValueError:
        return None


def edit_lines(patch: str | None) -> frozenset[str]:
    """The original lines a unified diff removes or shows as context, stripped."""
    out: set[str] = set()
    in_hunk = False
    for line in (patch or "").splitlines():
        if line.startswith("@@"):
            in_hunk = True
        elif line.startswith(("diff ", "--- ", "+++ ", "index ")):
            in_hunk = False
        elif in_hunk and line[:1] in ("-", " "):
            stripped = line[1:].strip()
            if len(stripped) >= MIN_EDIT_LINE and any(c.isalnum() for c in stripped):
                out.add(stripped)
    return frozenset(out)


class Lookup:
    """A prompt's text, searched for references (line numbers as whole words)."""

    __slots__ = ("_numbers", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._numbers: frozenset[str] | None = None

    def has(self, kind: str, ref: str) -> bool:
        if kind == "lines":
            if self._numbers is None:
                self._numbers = frozenset(re.findall(r"\d+", self.text))
            return ref in self._numbers
        return ref in self.text
