"""The `audit:` config section -> `AuditConfig`, validated at load with `file:line: key.path`.

```yaml
audit:
  sink: sqlite              # sqlite (default) | jsonl | postgres | none
  path: curator-audit.db    # relative to the config file; "-" = stdout (jsonl only);
                            # a URL picks its sink (postgresql://...)
  store_responses: true
  redact:
    builtin: true
    patterns:
      - {name: employee_id, regex: "EMP-[0-9]{6}"}
  max_queue: 10000
  max_queue_bytes: 64MiB    # and the bodies of the records waiting, in bytes (as sent)
  cache_bytes: 32MiB        # what the writer remembers of the messages it redacted, so a
                            # resent history is not redacted again (0: nothing)
  retention_days: 30        # retention (sqlite, postgres; max_age_days is the old name)
  max_bytes: 2GB            # bytes, or KB/MB/GB (x1000) or KiB/MiB/GiB (x1024)
  spool: {path: curator-audit-spool.db, max_bytes: 1GiB, max_age_hours: 72}  # postgres only
```

This module knows only the keys every sink shares; a sink's own keys (postgres: `dsn`)
are parsed by the sink, through `proxy.observability.audit.sinks.registry`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies import validate as v
from policies.errors import ParamError
from policies.urls import masked_url
from policies.validate import Problems, Reader, describe
from policies.yamlsrc import KeyPath
from proxy.config.sizes import read_size
from proxy.config.spool import SpoolConfig, read_spool
from proxy.observability.audit.redact import Detector, custom_detector
from proxy.observability.audit.sinks.base import STDOUT, Retention, SinkType
from proxy.observability.audit.sinks.registry import SINKS, by_scheme, owning

OFF = "none"
DEFAULT_CACHE_BYTES = 32 * 2**20
DEFAULT_QUEUE_BYTES = 64 * 2**20
COMMON_KEYS = (
    "sink", "path", "store_responses", "redact", "max_queue", "max_queue_bytes", "cache_bytes",
    "retention_days", "max_age_days", "max_bytes", "spool",
)  # fmt: skip
KEYS = (*COMMON_KEYS, *dict.fromkeys(key for t in SINKS.values() for key in t.keys))
DEFAULT_PATHS = {name: t.default_path for name, t in SINKS.items() if t.default_path}
_MASKED = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RedactConfig:
    """The built-in detectors on or off, plus the operator's own (compiled at load)."""

    builtin: bool = True
    patterns: tuple[Detector, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """Where audit records go, what they keep, and how long."""

    sink: str = "sqlite"
    """A name in `sinks.registry.SINKS`, or "none"."""
    path: str = DEFAULT_PATHS["sqlite"]
    """Resolved by `parse_audit` against the config file's folder; "-" is stdout; a URL
    (postgresql://...) as given. May hold credentials: show `where`, never this."""
    store_responses: bool = True
    redact: RedactConfig = field(default_factory=RedactConfig)
    max_queue: int = 10_000
    max_queue_bytes: int = DEFAULT_QUEUE_BYTES
    """The request and response bytes (as relayed) of the records waiting to be written,
    held ones included: an unreachable store with 1 MB requests queued ~9 GB by count."""
    cache_bytes: int = DEFAULT_CACHE_BYTES
    """Redacted messages the writer keeps in memory (`RecordBuilder`), in bytes."""
    max_age_days: float | None = None
    """`retention_days` (or its old name, `max_age_days`)."""
    max_bytes: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    """The sink's own keys, as its `read_options` parsed them (postgres: `dsn`)."""
    spool: SpoolConfig | None = None
    """A remote sink's disk spool (`proxy.config.spool`); None: none."""

    @property
    def enabled(self) -> bool:
        return self.sink != OFF

    @property
    def retention(self) -> Retention:
        return Retention(self.max_age_days, self.max_bytes)

    @property
    def where(self) -> str:
        """Where records go, printable: credentials in URLs and DSNs masked."""
        if self.path == STDOUT:
            return "stdout"
        return masked_location(self.path)

    def __repr__(self) -> str:
        # A DSN may carry a password: reprs end up in logs and tracebacks.
        return f"AuditConfig(sink={self.sink!r}, where={self.where!r})"


def masked_location(location: str) -> str:
    """A path as is; a URL or key=value DSN with its password and query values masked."""
    if "://" in location:
        return masked_url(location)
    return _MASKED.sub(r"\1***", location)


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
    name = read.get(data, "sink", path, _implied_sink(data), v.one_of(*SINKS, OFF))
    sink = SINKS.get(name)
    raw_path = read.get(data, "path", path, (sink and sink.default_path) or "", v.text)
    config = AuditConfig(
        sink=name,
        path=_resolve(raw_path, base_dir),
        store_responses=read.get(data, "store_responses", path, True, v.boolean),
        redact=_redact(read, data.get("redact"), (*path, "redact")),
        max_queue=read.get(data, "max_queue", path, 10_000, v.int_in(1, 10_000_000)),
        max_queue_bytes=read_size(read, data, (*path, "max_queue_bytes")) or DEFAULT_QUEUE_BYTES,
        cache_bytes=_cache_bytes(read, data, path),
        max_age_days=_age(read, data, path),
        max_bytes=read_size(read, data, (*path, "max_bytes")),
        options=sink.read_options(read, data, path) if sink else {},
        spool=read_spool(read, data, path, base_dir=base_dir, remote=bool(sink and sink.remote)),
    )
    if sink and sink.location_key and config.options.get(sink.location_key):
        config = replace(config, path=str(config.options[sink.location_key]))
    _check_sink(read.problems, config, sink, data, path)
    return config


def _implied_sink(data: Mapping[str, Any]) -> str:
    """No `sink:` key: a URL's scheme (postgresql://) or an owned key (dsn) says which."""
    location = data.get("path")
    found = by_scheme(location) if isinstance(location, str) else None
    found = found or owning(data)
    return found.name if found else "sqlite"


def _age(read: Reader, data: Mapping[str, Any], path: KeyPath) -> float | None:
    if data.get("retention_days") is not None and data.get("max_age_days") is not None:
        read.problems.add(
            (*path, "max_age_days"), "the old name of retention_days: give only one of them"
        )
    key = "retention_days" if data.get("retention_days") is not None else "max_age_days"
    age: float | None = read.get(data, key, path, None, v.positive_number)
    return age


def _resolve(raw: str, base_dir: Path) -> str:
    if raw in (STDOUT, "") or "://" in raw:
        return raw
    return str((base_dir / os.path.expanduser(raw)).absolute())


def _check_sink(
    problems: Problems, config: AuditConfig, sink: SinkType | None, data: Any, path: KeyPath
) -> None:
    if config.path == STDOUT and config.sink != "jsonl":
        problems.add((*path, "path"), '"-" (stdout) needs sink: jsonl')
    scheme = by_scheme(config.path)
    if "://" in config.path and sink is not None and scheme is not sink:
        problems.add((*path, "path"), f"sink: {config.sink} takes a file path, not this URL")
    for key in ("retention_days", "max_age_days", "max_bytes"):
        if sink is not None and key not in sink.retention and data.get(key) is not None:
            problems.add((*path, key), _no_retention(key, sink))
    for key in KEYS:
        if key not in COMMON_KEYS and data.get(key) is not None and key not in _own(sink):
            problems.add((*path, key), f"not a key of sink: {config.sink}")


def _no_retention(key: str, sink: SinkType) -> str:
    names = [name for name, t in SINKS.items() if key in t.retention]
    if sink.retention:
        return f"applies to sink: {', '.join(names)} only; use {sink.retention[0]} here"
    return (
        f"retention applies to sink: {', '.join(names)} only; "
        f"rotate {sink.name.upper()} files with your log tooling"
    )


def _own(sink: SinkType | None) -> tuple[str, ...]:
    return sink.keys if sink else ()


def _cache_bytes(read: Reader, data: Mapping[Any, Any], path: KeyPath) -> int:
    found = read_size(read, data, (*path, "cache_bytes"), minimum=0)
    return DEFAULT_CACHE_BYTES if found is None else found


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
