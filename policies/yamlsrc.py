"""YAML that remembers where each key was, so errors can say `file:line: key.path: problem`.

Built on PyYAML's compose API (SafeLoader): the node tree carries marks, and plain data is
constructed from it while recording the line of every key and list item. Duplicate keys,
which PyYAML silently resolves as "last wins", are reported instead.

`${VAR}` / `${VAR:-default}` substitution (with `$$` for a literal `$`) runs on scalar values
after parsing, so environment text can never add YAML structure. A plain (unquoted) scalar
is re-typed after substitution the way YAML types it (`port: ${PORT:-8080}` is an int,
`api_key: ${KEY:-}` is null); a quoted one stays a string.

What a problem must never quote is noted in `Located.hidden`: each substituted value (it
may be a key: errors name its variable instead), and a whole file that is one scalar (a
secret file named as a policy: errors name the file instead).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from policies.envsubst import references, substitute
from policies.errors import ConfigError, Problem

Key = str | int
KeyPath = tuple[Key, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_VALUE_TAG = "tag:yaml.org,2002:value"
"""What YAML 1.1 resolves a lone `=` to; PyYAML has no constructor for it. It is text."""
MAX_ALIAS_VALUES = 100_000
"""How many values aliases may add beyond the text's own (each use of `*anchor` builds its
anchor's values again): a 560-byte "billion laughs" file of nested aliases expanded to
10^9 values, gigabytes; no real config comes near this."""


def format_path(path: Iterable[Key]) -> str:
    """`("policies", "agents", "curators", 2)` -> `policies.agents.curators[2]`."""
    out = ""
    for key in path:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else str(key)
    return out


Hidden = Mapping[KeyPath, tuple[object, str]]
"""Values errors must not quote, by key path: (the value, what to say instead)."""
WHOLE_FILE = "the file's text"


@dataclass(frozen=True, slots=True)
class Located:
    """Plain YAML data plus the line of every key path, and problems found while parsing."""

    data: Any
    file: str
    lines: Mapping[KeyPath, int]
    problems: tuple[Problem, ...] = ()
    hidden: Hidden = field(default_factory=dict)
    """Substituted values (said as their `${VAR}`) and a one-scalar file's text."""

    def line(self, path: KeyPath) -> int | None:
        return line_of(self.lines, path)


def line_of(lines: Mapping[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its nearest ancestor that has one (a missing key's parent)."""
    for end in range(len(path), -1, -1):
        found = lines.get(path[:end])
        if found is not None:
            return found
    return None


def parse(text: str, file: str, *, env: Mapping[str, str] | None = None) -> Located:
    """Parse one YAML document. Syntax errors raise ConfigError; other problems are returned.

    With `env`, `${VAR}` references in scalar values are substituted from it.
    """
    try:
        # The reader rejects control characters as soon as it is built.
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(file, None, "", f"invalid YAML: {exc}")]) from exc
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise ConfigError([_syntax_problem(file, exc)]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(file, None, "", f"invalid YAML: {exc}")]) from exc
    finally:
        loader.dispose()
    if root is None:
        return Located(None, file, {(): 1})
    builder = _Builder(yaml.SafeLoader(""), env, file)
    data = builder.build(root, ())
    problems = [
        Problem(file, line_of(builder.lines, path), format_path(path), message)
        for path, message in builder.problems
    ]
    hidden = builder.hidden
    if isinstance(data, str | int | float) and () not in hidden:
        hidden[()] = (data, WHOLE_FILE)
    return Located(data, file, builder.lines, tuple(problems), hidden)


def parse_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Located:
    """`parse` a file's text; an unreadable file raises ConfigError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError([Problem(str(path), None, "", f"cannot read: {reason}")]) from exc
    except UnicodeDecodeError as exc:
        message = f"cannot read: not UTF-8 text (byte {exc.start})"
        raise ConfigError([Problem(str(path), None, "", message)]) from exc
    return parse(text, str(path), env=env)


def _syntax_problem(file: str, exc: yaml.MarkedYAMLError) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    parts = [p for p in (exc.context, exc.problem) if p]
    return Problem(file, line, "", "invalid YAML: " + (", ".join(parts) or str(exc)))


_UNCONSTRUCTIBLE = (yaml.YAMLError, ValueError, TypeError, OverflowError)
"""What constructing an explicitly tagged scalar raises when its text does not fit the tag
(`!!int x` raises ValueError, `!!binary` of bad base64 a ConstructorError)."""


def _why(exc: Exception) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        return exc.problem
    return str(exc)


class _Builder:
    """Turns a composed node tree into plain data, recording lines and problems."""

    def __init__(
        self, constructor: yaml.SafeLoader, env: Mapping[str, str] | None, file: str
    ) -> None:
        self.file = file
        self._constructor = constructor
        self._env = env
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[tuple[KeyPath, str]] = []
        self.hidden: dict[KeyPath, tuple[object, str]] = {}
        self._active: set[int] = set()
        self._built: set[int] = set()
        """The nodes built so far (the composed tree keeps them alive: ids stay unique)."""
        self._repeats = 0
        """Values built again through aliases."""

    def _bomb(self, path: KeyPath) -> Problem:
        message = (
            f"aliases expand to more than {MAX_ALIAS_VALUES} values (an alias bomb?): "
            "write the values out or use fewer aliases"
        )
        return Problem(self.file, line_of(self.lines, path), format_path(path), message)

    def build(self, node: Node, path: KeyPath) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in self._built:
            self._repeats += 1
            if self._repeats > MAX_ALIAS_VALUES:
                raise ConfigError([self._bomb(path)])
        else:
            self._built.add(id(node))
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        if id(node) in self._active:
            self.problems.append((path, "recursive alias: a value may not contain itself"))
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, path)
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in seen:
                self.problems.append(
                    ((*path, key), f"duplicate key {key!r} (first on line {seen[key]})")
                )
            seen.setdefault(key, line)
        try:
            # Resolves `<<: *anchor` merges; explicit keys win over merged ones.
            self._constructor.flatten_mapping(node)
        except yaml.MarkedYAMLError as exc:
            self.problems.append((path, f"invalid merge: {exc.problem}"))
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, path)
            key_path = (*path, key)
            self.lines[key_path] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, key_path)
        return out

    def _key(self, node: Node, path: KeyPath) -> Any:
        if not isinstance(node, ScalarNode):
            kind = "mapping" if isinstance(node, MappingNode) else "list"
            name = f"<{kind} key on line {node.start_mark.line + 1}>"
            # Reported at the key itself, not at the mapping that holds it.
            self.lines.setdefault((*path, name), node.start_mark.line + 1)
            problem = ((*path, name), "keys must be plain values, not lists or mappings")
            if problem not in self.problems:  # keys are read twice (see _mapping)
                self.problems.append(problem)
            return name
        try:
            key = self._construct(node)
        except _UNCONSTRUCTIBLE as exc:  # an explicit tag that does not fit: `!!int x:`
            problem = ((*path, node.value), f"invalid key: {_why(exc)}")
            if problem not in self.problems:  # keys are read twice (see _mapping)
                self.problems.append(problem)
            return node.value
        # `yes:` or `1.5:` would otherwise become True / 1.5; the text is what the user meant.
        return key if isinstance(key, str | int) and not isinstance(key, bool) else node.value

    def _construct(self, node: ScalarNode) -> Any:
        if node.tag == _VALUE_TAG:
            return node.value
        try:
            return self._constructor.construct_object(node, deep=True)
        except _UNCONSTRUCTIBLE:
            # PyYAML leaves a failed node marked as in progress: the next read of it would
            # report it as recursive.
            self._constructor.recursive_objects.pop(node, None)
            raise

    def _scalar(self, node: ScalarNode, path: KeyPath) -> Any:
        try:
            value = self._construct(node)
        except _UNCONSTRUCTIBLE as exc:
            self.problems.append((path, f"invalid value: {_why(exc)}"))
            return None
        if self._env is None or not isinstance(value, str) or "$" not in value:
            return value
        return self._substitute(node, value, path)

    def _substitute(self, node: Node, value: str, path: KeyPath) -> Any:
        typed = self._substituted(node, value, path)
        # Hidden when the environment gave any of it (a default is the file's own text).
        names = [name for name in references(value) if (self._env or {}).get(name)]
        if names:
            self.hidden[path] = (typed, " ".join(f"${{{name}}}" for name in names))
        return typed

    def _substituted(self, node: Node, value: str, path: KeyPath) -> Any:
        result, missing = substitute(value, self._env or {})
        for message in missing:
            self.problems.append((path, message))
        if missing or not isinstance(node, ScalarNode) or node.style is not None:
            return result
        # Only the scalar's type is re-resolved; the text cannot become structure.
        # types-PyYAML leaves Resolver.resolve untyped; it returns the tag string.
        tag = self._constructor.resolve(ScalarNode, result, (True, False))  # type: ignore[no-untyped-call]
        if tag == _STR_TAG:
            return result
        try:
            return self._construct(ScalarNode(tag, result))
        except _UNCONSTRUCTIBLE as exc:  # text that looks like a type but is not: 2024-13-45
            self.problems.append((path, f"invalid value after substitution: {_why(exc)}"))
            return None
