"""The `audit:` config section -> `AuditConfig`, validated at load with `file:line: key.path`.

```yaml
audit:
  sink: sqlite              # sqlite (default) | jsonl | none
  path: curator-audit.db    # relative to the config file; "-" = stdout (jsonl only)
  store_responses: true
  redact:
    builtin: true
    patterns:
      - {name: employee_id, regex: "EMP-[0-9]{6}"}
  max_queue: 10000
  max_age_days: 30          # retention (sqlite only), and/or:
  max_bytes: 2GB            # bytes, or KB/MB/GB (x1000) or KiB/MiB/GiB (x1024)
```
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from policies import validate as v
from policies.errors import ParamError
from policies.validate import Problems, Reader, describe
from policies.yamlsrc import KeyPath
from proxy.observability.audit.redact import Detector, custom_detector

STDOUT = "-"
"""`path: -`: the JSONL sink writes to standard output."""
SinkName = Literal["sqlite", "jsonl", "none"]
SINKS: tuple[SinkName, ...] = ("sqlite", "jsonl", "none")
KEYS = ("sink", "path", "store_responses", "redact", "max_queue", "max_age_days", "max_bytes")
DEFAULT_PATHS = {"sqlite": "curator-audit.db", "jsonl": "curator-audit.jsonl"}

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RedactConfig:
    """The built-in detectors on or off, plus the operator's own (compiled at load)."""

    builtin: bool = True
    patterns: tuple[Detector, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """Where audit records go, what they keep, and how long."""

    sink: SinkName = "sqlite"
    path: str = DEFAULT_PATHS["sqlite"]
    """Resolved by `parse_audit` against the config file's folder; "-" is stdout."""
    store_responses: bool = True
    redact: RedactConfig = field(default_factory=RedactConfig)
    max_queue: int = 10_000
    max_age_days: float | None = None
    max_bytes: int | None = None

    @property
    def enabled(self) -> bool:
        return self.sink != "none"


def parse_audit(
    data: Mapping[str, Any] | None,
    *,
    file: str,
    lines: Mapping[KeyPath, int],
    path_prefix: str | KeyPath = "audit",
    base_dir: str | os.PathLike[str] | None = None,
) -> AuditConfig:
    """Validate an `audit:` mapping; raises ConfigError listing every problem.

    `lines` is `Located.lines` from `policies.yamlsrc`; relative paths resolve against
    `base_dir`, by default the folder of `file`.
    """
    problems = Problems(file, lines)
    prefix = tuple(path_prefix.split(".")) if isinstance(path_prefix, str) else path_prefix
    folder = Path(file).parent if base_dir is None else Path(base_dir)
    config = read_audit(Reader(problems), {} if data is None else data, prefix, base_dir=folder)
    problems.raise_if_any()
    return config


def read_audit(read: Reader, value: object, path: KeyPath, *, base_dir: Path) -> AuditConfig:
    """Like `parse_audit`, reporting into a loader's shared `Reader` instead of raising."""
    data = read.mapping(value, path, KEYS)
    if data is None:
        return AuditConfig()
    sink: SinkName = read.get(data, "sink", path, "sqlite", v.one_of(*SINKS))
    raw_path = read.get(data, "path", path, DEFAULT_PATHS.get(sink, ""), v.text)
    config = AuditConfig(
        sink=sink,
        path=_resolve(raw_path, base_dir),
        store_responses=read.get(data, "store_responses", path, True, v.boolean),
        redact=_redact(read, data.get("redact"), (*path, "redact")),
        max_queue=read.get(data, "max_queue", path, 10_000, v.int_in(1, 10_000_000)),
        max_age_days=read.get(data, "max_age_days", path, None, v.positive_number),
        max_bytes=_size(read, data, (*path, "max_bytes")),
    )
    _check_sink(read.problems, config, data, path)
    return config


def _resolve(raw: str, base_dir: Path) -> str:
    if raw == STDOUT:
        return raw
    return str((base_dir / os.path.expanduser(raw)).absolute())


def _check_sink(problems: Problems, config: AuditConfig, data: Any, path: KeyPath) -> None:
    if config.path == STDOUT and config.sink != "jsonl":
        problems.add((*path, "path"), '"-" (stdout) needs sink: jsonl')
    for key in ("max_age_days", "max_bytes"):
        if config.sink == "jsonl" and data.get(key) is not None:
            problems.add(
                (*path, key),
                "retention applies to sink: sqlite only; rotate JSONL files with your log tooling",
            )


def _size(read: Reader, data: Mapping[Any, Any], path: KeyPath) -> int | None:
    value = data.get(path[-1])
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        number = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if number is None or number < 1:
        read.problems.add(
            path, f"expected a size in bytes (e.g. 500000000 or '500MB'), got {describe(value)}"
        )
        return None
    return int(number)


def _redact(read: Reader, value: object, path: KeyPath) -> RedactConfig:
    if value is None:
        return RedactConfig()
    data = read.mapping(value, path, ("builtin", "patterns"))
    if data is None:
        return RedactConfig()
    builtin = read.get(data, "builtin", path, True, v.boolean)
    patterns = data.get("patterns")
    if patterns is None:
        return RedactConfig(builtin)
    if not isinstance(patterns, list):
        read.problems.add((*path, "patterns"), f"expected a list, got {describe(patterns)}")
        return RedactConfig(builtin)
    detectors: list[Detector] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(patterns):
        where = (*path, "patterns", i)
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name in seen:
            read.problems.add(
                (*where, "name"), f"duplicate name {name!r} (also patterns[{seen[name]}])"
            )
            continue
        if isinstance(name, str):
            seen[name] = i
        detector = _pattern(read, item, where)
        if detector is not None:
            detectors.append(detector)
    return RedactConfig(builtin, tuple(detectors))


def _pattern(read: Reader, item: object, path: KeyPath) -> Detector | None:
    data = read.mapping(item, path, ("name", "regex"))
    if data is None:
        return None
    read.require(data, ("name", "regex"), path)
    name = read.get(data, "name", path, None, v.text)
    regex = read.get(data, "regex", path, None, v.text)
    if name is None or regex is None:
        return None
    try:
        return custom_detector(name, regex)
    except ParamError as exc:
        read.problems.add((*path, exc.field), exc.message)
    return None
