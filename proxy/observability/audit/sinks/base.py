"""What every audit sink provides, and how the registry describes one.

A sink is one module holding its writer class and one `SinkType`: the name used in
`audit.sink`, the URL schemes that select it from `audit.path`, the `audit:` keys it owns
(parsed by its own `read_options`), and `open`. `sinks.registry.SINKS` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from policies.validate import Reader
from policies.yamlsrc import KeyPath
from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage

STDOUT = "-"
"""`path: -`: the JSONL sink writes to standard output."""
DIGEST_SIZE = 16
"""Bytes of a message digest; records hold their messages' digests concatenated."""
TOOLS_REF = "tools_ref"
"""In a content-addressed store, a record's `tools` are a blob beside its messages (an agent
sends the same tools every turn): its fields hold the blob's digest under this key instead.
Readers put the tools back (`readers.base.resolve_tools`)."""


def stored_fields(record: AuditRecord) -> bytes:
    """The record's fields as a content-addressed store keeps them: tools by reference."""
    if record.tools is None:
        return orjson.dumps(record.fields)
    return orjson.dumps({**record.fields, "tools": None, TOOLS_REF: record.tools.digest.hex()})


def blobs_of(record: AuditRecord) -> tuple[StoredMessage, ...]:
    """Every content-addressed blob the record references: messages, then its tools."""
    blobs = record.original + (record.curated or ())
    return blobs if record.tools is None else (*blobs, record.tools)


class Bodies:
    """A batch's message bodies by digest, for a store that keeps each message once. A
    body its record left out (`RecordBuilder`'s `by_reference`) is made again only when
    asked for: when the store turns out not to have it."""

    __slots__ = ("_data", "_left_out")

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._left_out: dict[bytes, AuditRecord] = {}

    def add(self, record: AuditRecord, messages: Sequence[StoredMessage]) -> None:
        self._data.update((m.digest, m.data) for m in messages if m.data is not None)
        if record.remake is not None:
            self._left_out.update((m.digest, record) for m in messages if m.data is None)

    def __getitem__(self, digest: bytes) -> bytes:
        data = self._data.get(digest)
        if data is not None:
            return data
        remake = self._left_out[digest].remake
        assert remake is not None  # only records that can remake are listed
        return remake(digest)


def tools_digest(fields: bytes) -> list[bytes]:
    """The digest of the tools blob a stored record's fields reference (none or one)."""
    if TOOLS_REF.encode() not in fields:  # most records of a store without tools: no parse
        return []
    ref = orjson.loads(fields).get(TOOLS_REF)
    return [bytes.fromhex(ref)] if isinstance(ref, str) else []


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
    remote: bool = False
    """A store over the network (postgres): records wait in a disk spool while it is down
    (`audit.spool`)."""
    by_reference: bool = False
    """The store keeps each message once, by digest: its records need not carry the bodies
    of messages the writer has seen before (`RecordBuilder`'s `by_reference`)."""
