"""`${VAR}` / `${VAR:-default}` substitution in config values (`$$` is a literal `$`), with
shell semantics: `:-` applies to an unset or an empty variable (see `policies.yamlsrc`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

_VAR = re.compile(r"\$(\$|\{([^}]*)\}|\{)")
_VAR_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


def references(text: str) -> list[str]:
    """The names of the variables `text` refers to (`${NAME}`, `${NAME:-default}`)."""
    names = []
    for match in _VAR.finditer(text):
        parsed = _VAR_BODY.fullmatch(match.group(2) or "")
        if parsed is not None:
            names.append(parsed.group(1))
    return names


def substitute(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Expand `${VAR}`, `${VAR:-default}` and `$$` in `text`; also return what went wrong."""
    problems: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        body = match.group(2)
        parsed = _VAR_BODY.fullmatch(body) if body is not None else None
        if parsed is None:
            problems.append(
                f"malformed variable reference {match.group(0)!r}: "
                "expected ${NAME} or ${NAME:-default} (write $$ for a literal $)"
            )
            return match.group(0)
        name, default = parsed.group(1), parsed.group(2)
        # Shell semantics: `:-` applies to an unset or an empty variable.
        if env.get(name):
            return env[name]
        if default is not None:
            return default
        if name in env:
            return ""
        problems.append(
            f"environment variable {name!r} is not set (use ${{{name}:-default}} for a default)"
        )
        return match.group(0)

    return _VAR.sub(replace, text), problems
