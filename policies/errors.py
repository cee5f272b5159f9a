"""Errors that say where: `file:line: key.path: problem`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a config or policy file."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ConfigError(Exception):
    """A config or policy failed validation; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ContextOverflow(Exception):
    """Pins plus the newest unit exceed the budget and the policy says `on_overflow: reject`."""

    def __init__(self, tokens: int, limit: int) -> None:
        self.tokens = tokens
        self.limit = limit
        super().__init__(
            f"This request needs {tokens} prompt tokens after curation, but the context "
            f"allows {limit}. Please reduce the length of the messages."
        )


class ParamError(ValueError):
    """A curator parameter is invalid; `field` is the parameter's YAML key."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
