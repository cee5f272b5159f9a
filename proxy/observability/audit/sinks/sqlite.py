"""SQLite audit store: WAL, one transaction per batch of records, each distinct message
stored once. Reading it back: `proxy.observability.audit.readers.sqlite`.

A record references its messages by hash (16-byte blake2b of the redacted canonical JSON,
concatenated in order), so a conversation that resends its growing history every turn
costs storage linear in its length, not quadratic. `message_refs` counts references:
retention drops unreferenced messages without scanning every record. The counts are a
table apart so that counting a message sent again never rewrites its body, and a turn
counts only what its conversation's previous record did not (`sqlite_refs`).

The schema is versioned (`PRAGMA user_version`) and migrated in place at open, under
BEGIN IMMEDIATE, so workers starting together migrate it once (`sinks.sqlite_schema`).
A batch's rows go in multi-row INSERTs, the GIL let go before each (`sinks.sqlite_rows`).

Several processes (`--workers N`) may share one file: WAL lets readers run beside the
writer, `busy_timeout` queues writers, and a batch is one transaction, so a crash (even
`kill -9`) loses at most the records still queued or in flight (one batch window).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks.base import (
    DIGEST_SIZE,
    Bodies,
    Retention,
    Sink,
    SinkType,
    StoreUnavailable,
    blobs_of,
    split_digests,
    stored_fields,
)
from proxy.observability.audit.sinks.report_backfill import backfill_sqlite
from proxy.observability.audit.sinks.report_columns import REPORT_COLUMNS, report_values
from proxy.observability.audit.sinks.sqlite_refs import Chains, big, unref
from proxy.observability.audit.sinks.sqlite_rows import insert_rows
from proxy.observability.audit.sinks.sqlite_schema import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    connect_writer,
    migrate,
    migrate_file,
    transaction,
)
from proxy.priority import let_the_loop_in

PRUNE_BATCH = 200
FILL_PER_PRUNE = 20_000
"""Older records whose report columns a retention pass fills (`report_backfill`): ~0.4 s."""

_UNAVAILABLE = ("disk is full", "readonly", "read-only", "unable to open", "disk i/o", "locked")
"""SQLite errors that mean "the store cannot take writes now", not "this batch is bad"."""
_STORE = "INSERT INTO messages (hash, refs, body) VALUES (?, 0, ?) ON CONFLICT (hash) DO NOTHING"
_COUNT = (
    "INSERT INTO message_refs (hash, refs) VALUES (?, ?) "
    "ON CONFLICT (hash) DO UPDATE SET refs = refs + excluded.refs"
)
_COUNT_NEW = _COUNT + " RETURNING hash, refs"
"""`_COUNT`, saying each message's new total: which messages are new (`_count_refs`)."""
_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
"""Whether SQLite has `RETURNING` (3.35+)."""
_COLUMNS = ("id", "kind", "parent_id", "route", "policy", "model", "status")
"""Record fields copied into columns, for listing and filtering without parsing JSON."""
_INSERT = (
    f"INSERT INTO records (seq, time, {', '.join(_COLUMNS)}, original, curated, fields, "
    f"{', '.join(REPORT_COLUMNS)}, base) VALUES ({', '.join('?' * (13 + len(REPORT_COLUMNS)))})"
)


class SqliteSink:
    """Writes records to a SQLite store and applies retention. Used by one thread only."""

    def __init__(
        self,
        path: str,
        *,
        max_age_days: float | None = None,
        max_bytes: int | None = None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        # (max_age_days is `audit.retention_days`; the old key name is kept working.)
        self.path = path
        self.max_age_days = max_age_days
        self.max_bytes = max_bytes
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._chains = Chains()

    def _connection(self) -> sqlite3.Connection:
        # Opened lazily, in the writer thread that uses it; a failure is retried next time.
        if self._conn is None:
            try:
                self._conn = connect_writer(self.path, busy_timeout_ms=self._busy_timeout_ms)
            except sqlite3.OperationalError as exc:
                raise _mapped(exc) from exc
            self._chains.clear()  # maybe another file at that path now
        return self._conn

    def write(self, record: AuditRecord) -> None:
        self.write_many((record,))

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        """All of `records` in one transaction: messages first (each distinct one once)."""
        conn = self._connection()
        bodies = Bodies()
        rows = []
        for record in records:
            bodies.add(record, blobs_of(record))
            curated = record.curated
            rows.append(
                (
                    record.time,
                    *(record.fields.get(column) for column in _COLUMNS),
                    b"".join(m.digest for m in record.original),
                    None if curated is None else b"".join(m.digest for m in curated),
                    stored_fields(record),
                    *report_values(record.time, record.fields),
                )
            )
        small = not any(big(record) for record in records)  # see sqlite_rows
        try:
            if small:
                let_the_loop_in()
            with transaction(conn):
                counted = self._chains.count(conn, records)
                new = _count_refs(conn, counted.adds, hand_over=small)
                insert_rows(conn, _STORE, [(d, bodies[d]) for d in new], hand_over=small)
                numbered = zip(counted.seqs(), rows, counted.bases, strict=True)
                numbered_rows = [(seq, *row, base) for seq, row, base in numbered]
                insert_rows(conn, _INSERT, numbered_rows, hand_over=small)
                if small:
                    let_the_loop_in()  # before the commit
        except sqlite3.OperationalError as exc:
            raise _mapped(exc) from exc
        self._chains.remember(counted)

    def prune(self, now: float | None = None) -> int:
        """Apply retention: drop records past max_age_days, then the oldest over max_bytes.
        First, fill some older records' report columns (`report_backfill`).

        max_bytes bounds the pages holding data; the WAL file beside the store comes on
        top, up to journal_size_limit (64 MB) between checkpoints.
        """
        conn = self._connection()
        backfill_sqlite(conn, FILL_PER_PRUNE)
        if self.max_age_days is None and self.max_bytes is None:
            return 0
        deleted = 0
        if self.max_age_days is not None:
            cutoff = (time.time() if now is None else now) - self.max_age_days * 86400
            while count := _delete_oldest(conn, before=cutoff):
                deleted += count
        if self.max_bytes is not None:
            while (used := used_bytes(conn)) > self.max_bytes:
                # Delete about the share of records that is over the limit, then look again:
                # shared messages mean records free less than their share.
                total = conn.execute("SELECT count(*) FROM records").fetchone()[0]
                share = math.ceil(total * (used - self.max_bytes) / used)
                count = _delete_oldest(conn, limit=max(1, share))
                if not count:
                    break
                deleted += count
        if deleted:
            conn.execute("PRAGMA incremental_vacuum")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        return deleted

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _mapped(exc: sqlite3.OperationalError) -> Exception:
    """A full disk or a read-only file is the store being unavailable: the writer keeps
    the batch and retries; anything else fails the batch."""
    text = str(exc).lower()
    if any(marker in text for marker in _UNAVAILABLE):
        return StoreUnavailable(f"sqlite: {exc}")
    return exc


def _migrate_file(location: str, options: Mapping[str, Any]) -> list[int]:
    """`curator audit migrate`: the schema, then every older record's report columns."""
    applied = migrate_file(location, options)
    conn = connect_writer(location)
    try:
        backfill_sqlite(conn)
    finally:
        conn.close()
    return applied


def _open(location: str, _options: Mapping[str, Any], retention: Retention) -> Sink:
    return SqliteSink(location, max_age_days=retention.max_age_days, max_bytes=retention.max_bytes)


SINK = SinkType(
    "sqlite",
    _open,
    default_path="curator-audit.db",
    retention=("retention_days", "max_age_days", "max_bytes"),
    migrate=_migrate_file,
    by_reference=True,
)
__all__ = [
    "BUSY_TIMEOUT_MS",
    "DIGEST_SIZE",
    "SCHEMA_VERSION",
    "SINK",
    "SqliteSink",
    "connect_writer",
    "migrate",
    "split_digests",
    "transaction",
]


def _count_refs(
    conn: sqlite3.Connection, refs: Counter[bytes], *, hand_over: bool = False
) -> list[bytes]:
    """Add `refs` to the messages' reference counts; the messages not stored yet.

    A message's body is stored exactly while its count is (retention deletes both in one
    transaction, `_delete_oldest`), so a count this upsert created is a body to store,
    and one it raised is a body already there: an agent's resent history is not bound
    and sent to SQLite again (measured: a warm 127k-token record's write 0.81 -> 0.33 ms,
    a small one's 24 -> 13 us). The transaction (BEGIN IMMEDIATE) holds the store's write
    lock throughout, so no other worker prunes in between.
    """
    if not _RETURNING:
        insert_rows(conn, _COUNT, list(refs.items()), hand_over=hand_over)
        return list(refs)
    counted = insert_rows(conn, _COUNT_NEW, list(refs.items()), hand_over=hand_over)
    return [digest for digest, total in counted if total == refs[digest]]


def used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes in pages that hold data (free pages excluded)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def _delete_oldest(
    conn: sqlite3.Connection, *, before: float | None = None, limit: int = PRUNE_BATCH
) -> int:
    """Delete up to `limit` oldest records (older than `before`) and orphaned messages
    (`sqlite_refs.unref`).

    Batches keep each transaction short, so other workers' writes wait only briefly.
    """
    where = "" if before is None else "WHERE time < ? "
    limit = min(limit, PRUNE_BATCH)
    params: tuple[Any, ...] = (limit,) if before is None else (before, limit)
    with transaction(conn):
        rows = conn.execute(
            f"SELECT seq, base, original, curated, fields FROM records {where}"
            "ORDER BY time, seq LIMIT ?",
            params,
        ).fetchall()
        refs = unref(conn, rows)
        conn.executemany(
            "UPDATE message_refs SET refs = refs + ? WHERE hash = ?",
            [(n, d) for d, n in refs.items() if n],
        )
        digests = [(d,) for d, n in refs.items() if n < 0]  # only a count that fell can be 0
        conn.executemany(
            "DELETE FROM messages WHERE hash = ?1 AND EXISTS "
            "(SELECT 1 FROM message_refs WHERE hash = ?1 AND refs <= 0)",
            digests,
        )
        conn.executemany("DELETE FROM message_refs WHERE hash = ? AND refs <= 0", digests)
        conn.executemany("DELETE FROM records WHERE seq = ?", [(row[0],) for row in rows])
    return len(rows)
