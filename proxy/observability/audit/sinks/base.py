"""What every audit sink provides, and how the registry describes one.

A sink is one module holding its writer class and one `SinkType`: the name used in
`audit.sink`, the URL schemes that select it from `audit.path`, the `audit:` keys it owns
(parsed by its own `read_options`), and `open`. `sinks.registry.SINKS` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from policies.validate import Reader
from policies.yamlsrc import KeyPath
from proxy.observability.audit.entry import AuditRecord

STDOUT = "-"
"""`path: -`: the JSONL sink writes to standard output."""
DIGEST_SIZE = 16
"""Bytes of a message digest; records hold their messages' digests concatenated."""


def split_digests(blob: bytes | None) -> list[bytes]:
    if not blob:
        return []
    return [blob[i : i + DIGEST_SIZE] for i in range(0, len(blob), DIGEST_SIZE)]


class StoreUnavailable(Exception):
    """The store cannot take writes right now (down, unreachable, read-only, disk full).

    The writer keeps the batch and retries with backoff instead of counting it failed."""


class Sink(Protocol):
    """Where records go. Called from the writer thread only."""

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        """Write all of `records` (in order), or raise (`StoreUnavailable`: retry later)."""
        ...

    def prune(self, now: float | None = None) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Retention:
    """How long records are kept: by age, by the store's size, or both (None: forever)."""

    max_age_days: float | None = None
    max_bytes: int | None = None


OptionReader = Callable[[Reader, Mapping[str, Any], KeyPath], dict[str, Any]]
Opener = Callable[[str, Mapping[str, Any], Retention], Sink]
Migrator = Callable[[str, Mapping[str, Any]], list[int]]
"""Brings a store's schema up to date; returns the versions it applied."""


def no_options(_read: Reader, _data: Mapping[str, Any], _path: KeyPath) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class SinkType:
    """One registered sink: its YAML name, what selects it, its own keys, its opener."""

    name: str
    open: Opener
    schemes: tuple[str, ...] = ()
    """URL schemes of `audit.path` that select this sink (`postgresql://...`)."""
    default_path: str | None = None
    """`audit.path` when none is given; None: the sink needs one (or its own key)."""
    keys: tuple[str, ...] = ()
    """`audit:` keys only this sink reads."""
    read_options: OptionReader = no_options
    retention: tuple[str, ...] = ()
    """The retention keys that apply (`retention_days`, `max_age_days`, `max_bytes`)."""
    location_key: str | None = None
    """An own key that may give the location instead of `path` (postgres: `dsn`)."""
    migrate: Migrator | None = None
    """For stores with a versioned schema (`curator audit migrate`)."""
