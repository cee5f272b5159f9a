"""SQLite audit store: WAL, one transaction per batch of records, each distinct message
stored once. Reading it back: `proxy.observability.audit.readers.sqlite`.

A record references its messages by hash (16-byte blake2b of the redacted canonical JSON,
concatenated in order), so a conversation that resends its growing history every turn
costs storage linear in its length, not quadratic. `messages.refs` counts references:
retention drops unreferenced messages without scanning every record.

The schema is versioned (`PRAGMA user_version`) and migrated in place at open, under
BEGIN IMMEDIATE, so workers starting together migrate it once (`sinks.migrations`).

Several processes (`--workers N`) may share one file: WAL lets readers run beside the
writer, `busy_timeout` queues writers, and a batch is one transaction, so a crash (even
`kill -9`) loses at most the records still queued or in flight (one batch window).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks.base import (
    DIGEST_SIZE,
    Retention,
    Sink,
    SinkType,
    StoreUnavailable,
    split_digests,
)
from proxy.observability.audit.sinks.migrations import Migration, SchemaTooNew, latest, pending

BUSY_TIMEOUT_MS = 10_000
PRUNE_BATCH = 200

MIGRATIONS = (
    Migration(
        1,
        "content-addressed messages, records referencing them",
        (
            "CREATE TABLE IF NOT EXISTS messages "
            "(hash BLOB PRIMARY KEY, refs INTEGER NOT NULL, body BLOB NOT NULL)",
            "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY, time REAL NOT NULL, "
            "id TEXT NOT NULL, kind TEXT NOT NULL, parent_id TEXT, route TEXT, policy TEXT, "
            "model TEXT, status INTEGER, original BLOB NOT NULL, curated BLOB, "
            "fields BLOB NOT NULL)",
            "CREATE INDEX IF NOT EXISTS records_time ON records (time)",
            "CREATE INDEX IF NOT EXISTS records_id ON records (id)",
        ),
    ),
    Migration(
        2,
        "list and filter by route without scanning every record",
        ("CREATE INDEX IF NOT EXISTS records_route ON records (route, time)",),
    ),
)
SCHEMA_VERSION = latest(MIGRATIONS)
_UNAVAILABLE = ("disk is full", "readonly", "read-only", "unable to open", "disk i/o", "locked")
"""SQLite errors that mean "the store cannot take writes now", not "this batch is bad"."""
_UPSERT = (
    "INSERT INTO messages (hash, refs, body) VALUES (?, ?, ?) "
    "ON CONFLICT (hash) DO UPDATE SET refs = refs + excluded.refs"
)
_COLUMNS = ("id", "kind", "parent_id", "route", "policy", "model", "status")
"""Record fields copied into columns, for listing and filtering without parsing JSON."""
_INSERT = (
    f"INSERT INTO records (time, {', '.join(_COLUMNS)}, original, curated, fields) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def connect_writer(path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open (creating if needed, migrating if older) a store for writing, in WAL mode."""
    if not os.path.exists(path):
        # Audit logs hold prompts: create the file private before SQLite does.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    deadline = time.monotonic() + busy_timeout_ms / 1000
    try:
        while True:
            try:
                _prepare(conn, path, busy_timeout_ms)
                return conn
            except sqlite3.OperationalError as exc:
                # Workers starting together race to switch a new file to WAL; SQLite reports
                # that as "locked" without waiting, so wait here.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    except BaseException:
        conn.close()
        raise


def _prepare(conn: sqlite3.Connection, path: str, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(f"{path}: audit schema {version} is newer than this proxy")
    if version == 0:
        # Only takes effect before the first table exists; lets retention shrink the file.
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA journal_size_limit = 67108864")
    if version < SCHEMA_VERSION:
        migrate(conn, path)


def migrate(conn: sqlite3.Connection, path: str) -> list[int]:
    """Apply pending migrations; the versions applied (none if another worker did them)."""
    with transaction(conn):
        # Read again under the write lock: a worker starting beside us may have migrated.
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        try:
            steps = pending(current, MIGRATIONS, where=path)
        except SchemaTooNew as exc:
            raise sqlite3.DatabaseError(str(exc)) from None
        for step in steps:
            for statement in step.statements:
                conn.execute(statement)
        if steps:
            conn.execute(f"PRAGMA user_version = {steps[-1].version}")
    return [step.version for step in steps]


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT: takes the write lock up front, so no deadlock on upgrade."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # The original error says more; SQLite may have rolled back by itself already.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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

    def _connection(self) -> sqlite3.Connection:
        # Opened lazily, in the writer thread that uses it; a failure is retried next time.
        if self._conn is None:
            try:
                self._conn = connect_writer(self.path, busy_timeout_ms=self._busy_timeout_ms)
            except sqlite3.OperationalError as exc:
                raise _mapped(exc) from exc
        return self._conn

    def write(self, record: AuditRecord) -> None:
        self.write_many((record,))

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        """All of `records` in one transaction: messages first (each distinct one once)."""
        conn = self._connection()
        refs: Counter[bytes] = Counter()
        bodies: dict[bytes, bytes] = {}
        rows = []
        for record in records:
            messages = record.original + (record.curated or ())
            refs.update(m.digest for m in messages)
            bodies.update((m.digest, m.data) for m in messages)
            curated = record.curated
            rows.append(
                (
                    record.time,
                    *(record.fields.get(column) for column in _COLUMNS),
                    b"".join(m.digest for m in record.original),
                    None if curated is None else b"".join(m.digest for m in curated),
                    orjson.dumps(record.fields),
                )
            )
        try:
            with transaction(conn):
                conn.executemany(_UPSERT, [(d, n, bodies[d]) for d, n in refs.items()])
                conn.executemany(_INSERT, rows)
        except sqlite3.OperationalError as exc:
            raise _mapped(exc) from exc

    def prune(self, now: float | None = None) -> int:
        """Apply retention: drop records past max_age_days, then the oldest over max_bytes.

        max_bytes bounds the pages holding data; the WAL file beside the store comes on
        top, up to journal_size_limit (64 MB) between checkpoints.
        """
        if self.max_age_days is None and self.max_bytes is None:
            return 0
        conn = self._connection()
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


def _open(location: str, _options: Mapping[str, Any], retention: Retention) -> Sink:
    return SqliteSink(location, max_age_days=retention.max_age_days, max_bytes=retention.max_bytes)


def _migrate(location: str, _options: Mapping[str, Any]) -> list[int]:
    conn = sqlite3.connect(location, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        before = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        connect_writer(location).close()  # creates or migrates, as the writer would
        conn = sqlite3.connect(location, isolation_level=None)
        after = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    return list(range(before + 1, after + 1))


SINK = SinkType(
    "sqlite",
    _open,
    default_path="curator-audit.db",
    retention=("retention_days", "max_age_days", "max_bytes"),
    migrate=_migrate,
)
__all__ = ["DIGEST_SIZE", "SINK", "SqliteSink", "connect_writer", "migrate", "split_digests"]


def used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes in pages that hold data (free pages excluded)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def _delete_oldest(
    conn: sqlite3.Connection, *, before: float | None = None, limit: int = PRUNE_BATCH
) -> int:
    """Delete up to `limit` oldest records (older than `before`) and orphaned messages.

    Batches keep each transaction short, so other workers' writes wait only briefly.
    """
    where = "" if before is None else "WHERE time < ? "
    limit = min(limit, PRUNE_BATCH)
    params: tuple[Any, ...] = (limit,) if before is None else (before, limit)
    with transaction(conn):
        rows = conn.execute(
            f"SELECT seq, original, curated FROM records {where}ORDER BY time, seq LIMIT ?",
            params,
        ).fetchall()
        refs: Counter[bytes] = Counter()
        for _, original, curated in rows:
            refs.update(split_digests(original))
            refs.update(split_digests(curated))
        conn.executemany(
            "UPDATE messages SET refs = refs - ? WHERE hash = ?", [(n, d) for d, n in refs.items()]
        )
        conn.executemany("DELETE FROM messages WHERE hash = ? AND refs <= 0", [(d,) for d in refs])
        conn.executemany("DELETE FROM records WHERE seq = ?", [(row[0],) for row in rows])
    return len(rows)
