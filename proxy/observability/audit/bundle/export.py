"""Writing a bundle (`format`) from a store, as it reads: one record at a time.

A content-addressed store (`readers.base.ContentStore`: SQLite, PostgreSQL) is read as it
is stored: each record's fields and digests, and only the bodies of messages the bundle has
not given yet, so an agent's resent history is neither read nor written again. Any other
store (JSONL) is read whole, record by record, and its messages hashed as a store would.

What it holds: the digests written so far (one 16-byte `bytes` in a set, ~90 bytes each: a
million distinct messages, ~90 MB), one record, and the reader's chunk.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from proxy.observability.audit.bundle.format import (
    COMPRESS_LEVEL,
    HEADER,
    message_line,
    record_line,
)
from proxy.observability.audit.message_cache import message_digest
from proxy.observability.audit.readers.base import ContentStore, Store, StoredRow
from proxy.observability.audit.sinks.base import TOOLS_REF, split_digests, tools_digest
from proxy.observability.audit.stamps import parse_iso


@dataclass(slots=True)
class Written:
    """What an export wrote."""

    records: int = 0
    messages: int = 0


def write_bundle(store: Store, out: IO[bytes], since: float, until: float | None) -> Written:
    """The records with since <= time < until, oldest first, as a gzip'd bundle on `out`."""
    written = Written()
    seen: set[bytes] = set()
    with gzip.GzipFile(
        filename="", mode="wb", fileobj=out, compresslevel=COMPRESS_LEVEL, mtime=0
    ) as z:
        z.write(HEADER)
        for row, bodies in _rows(store, since, until, seen):
            for digest, body in bodies:
                z.write(message_line(digest, body))
                written.messages += 1
            z.write(record_line(row.time, row.fields, row.original, row.curated))
            written.records += 1
    return written


Bodies = list[tuple[bytes, bytes]]


def _rows(
    store: Store, since: float, until: float | None, seen: set[bytes]
) -> Iterator[tuple[StoredRow, Bodies]]:
    """Each record as stored, with the bodies it needs that `seen` lacks (then added)."""
    if isinstance(store, ContentStore):
        for row in store.stored_rows(since, until):
            refs = split_digests(row.original) + split_digests(row.curated)
            new = [d for d in dict.fromkeys(refs + tools_digest(row.fields)) if d not in seen]
            found = store.bodies(new) if new else {}
            # A body the store lacks (retention raced the read) stays a bare reference.
            bodies = [(d, found[d]) for d in new if d in found]
            seen.update(d for d, _ in bodies)
            yield row, bodies
        return
    for record in store.between(since, until):
        row, blobs = _addressed(record)
        bodies = [(d, b) for d, b in dict(blobs).items() if d not in seen]
        seen.update(d for d, _ in bodies)
        yield row, bodies


def _addressed(record: dict[str, Any]) -> tuple[StoredRow, Bodies]:
    """A full record (JSONL) as a content-addressed store would keep it."""
    blobs: Bodies = []

    def digests(messages: object) -> bytes:
        found = []
        for message in messages if isinstance(messages, list) else []:
            body = orjson.dumps(message)
            blobs.append((message_digest(body), body))
            found.append(blobs[-1][0])
        return b"".join(found)

    fields = {k: v for k, v in record.items() if k not in ("original", "curated")}
    original = digests(record.get("original"))
    curated = digests(record.get("curated"))
    tools = fields.get("tools")
    if tools is not None:
        body = orjson.dumps(tools)
        blobs.append((message_digest(body), body))
        fields = {**fields, "tools": None, TOOLS_REF: blobs[-1][0].hex()}
    try:
        when = parse_iso(str(record.get("time")))
    except ValueError:
        when = 0.0
    kept = None if curated == original else curated
    return StoredRow(when, orjson.dumps(fields), original, kept), blobs
