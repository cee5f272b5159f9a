"""Reading a bundle (`format`) back into a store, as it reads: a batch of records at a time.

Each record becomes the `AuditRecord` the proxy's writer would have handed the store's sink
(its fields with the tools back in place, its messages by digest), so the sink stores it as
it stores any other: SQLite counts its references, PostgreSQL keys it by the same
content-derived `uid` (importing a bundle twice inserts nothing twice there). A message's
body travels with the first batch that uses it; a sink that asks for one again (PostgreSQL
raising a message's `last_used` an hour of records later) gets it back from the store
through `fetch`.

What it holds: the digests of the bodies given so far (~90 bytes each, to check every
reference), the tools lists (few: an agent sends the same ones every turn), and one batch:
up to `BATCH_RECORDS` records or `BATCH_BYTES` of new bodies.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from proxy.observability.audit.bundle.format import (
    BundleError,
    Message,
    Record,
    check_header,
    parse_line,
)
from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.sinks.base import TOOLS_REF, Sink, split_digests

BATCH_RECORDS = 200
BATCH_BYTES = 32 << 20
Fetch = Callable[[bytes], bytes]
"""A body the store already holds, by digest."""


@dataclass(slots=True)
class Loaded:
    """What an import read and handed to the store."""

    records: int = 0
    messages: int = 0


def import_bundle(source: IO[bytes], sink: Sink, fetch: Fetch) -> Loaded:
    """Every record of the gzip'd bundle `source`, written to `sink` in batches."""
    loaded = Loaded()
    try:
        with gzip.GzipFile(fileobj=source, mode="rb") as lines:
            for batch in _batches(records_of(lines, fetch, loaded)):
                sink.write_many(batch)
                loaded.records += len(batch)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise BundleError(
            f"not a complete gzip file ({exc}); {loaded.records} records imported"
        ) from None
    return loaded


def _batches(records: Iterable[tuple[AuditRecord, int]]) -> Iterator[list[AuditRecord]]:
    batch: list[AuditRecord] = []
    size = 0
    for record, new_bytes in records:
        batch.append(record)
        size += new_bytes
        if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def records_of(
    lines: Iterable[bytes], fetch: Fetch, loaded: Loaded
) -> Iterator[tuple[AuditRecord, int]]:
    """The bundle's records, each with the bytes of the bodies first given with it."""
    given: set[bytes] = set()
    pending: dict[bytes, bytes] = {}
    tools: dict[bytes, bytes] = {}
    number = 0
    for number, line in enumerate(lines, 1):
        if number == 1:
            check_header(line)
            continue
        item = parse_line(line, number)
        if isinstance(item, Message):
            pending[item.digest] = item.body
            given.add(item.digest)
            loaded.messages += 1
            continue
        record = _record(item, pending, given, tools, fetch, number)
        yield record, sum(map(len, pending.values()))
        pending = {}
    if number == 0:
        raise BundleError("line 1: empty: not a curator audit bundle")


def _record(
    item: Record,
    pending: dict[bytes, bytes],
    given: set[bytes],
    tools: dict[bytes, bytes],
    fetch: Fetch,
    number: int,
) -> AuditRecord:
    def stored(digest: bytes) -> StoredMessage:
        if digest not in given:
            raise BundleError(f"line {number}: message {digest.hex()} is not in the bundle")
        return StoredMessage(digest, pending.get(digest))

    fields: dict[str, Any] = orjson.loads(item.fields)
    blob = None
    ref = fields.pop(TOOLS_REF, None)
    if isinstance(ref, str):
        digest = stored(_digest(ref, number)).digest
        if digest in pending:
            tools[digest] = pending[digest]
        body = tools.get(digest) or fetch(digest)
        # In place of the stored `"tools": null`, as the writer had it (the `uid` hashes it).
        fields["tools"] = orjson.Fragment(body)
        blob = StoredMessage(digest, body)
    original = tuple(stored(d) for d in split_digests(item.original))
    curated = (
        None if item.curated is None else tuple(stored(d) for d in split_digests(item.curated))
    )
    return AuditRecord(item.time, fields, original, curated, blob, fetch)


def _digest(ref: str, number: int) -> bytes:
    try:
        return bytes.fromhex(ref)
    except ValueError:
        raise BundleError(f"line {number}: {TOOLS_REF} is not a digest: {ref!r:.40}") from None
