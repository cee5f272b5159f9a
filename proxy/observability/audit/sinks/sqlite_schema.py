"""The SQLite audit store's schema, its migrations, and opening it for writing.

`PRAGMA user_version` is the schema version. `connect_writer` migrates an older store in
place under BEGIN IMMEDIATE (the write lock, taken up front), re-reading the version once
it holds the lock, so workers starting together migrate it once (`sinks.migrations`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from typing import Any

from proxy.observability.audit.sinks.migrations import Migration, SchemaTooNew, latest, pending
from proxy.observability.audit.sinks.report_columns import MONEY, REPORT_COLUMNS

BUSY_TIMEOUT_MS = 10_000

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
    Migration(
        3,
        "reference counts in a table of their own: counting a message sent again rewrote "
        "its whole body (SQLite rewrites a row to change a column; measured 1.4 ms of a "
        "127k-token request's 1.7 ms write). `messages.refs` is no longer read or kept up "
        "to date: dropping it would rewrite every stored message at startup",
        (
            "CREATE TABLE IF NOT EXISTS message_refs "
            "(hash BLOB PRIMARY KEY, refs INTEGER NOT NULL) WITHOUT ROWID",
            "INSERT OR IGNORE INTO message_refs (hash, refs) SELECT hash, refs FROM messages",
        ),
    ),
    Migration(
        4,
        "a record may name its conversation's previous record as its base and count only "
        "what it adds (`sinks.sqlite_refs`); existing records name none, as they count all",
        (
            "ALTER TABLE records ADD COLUMN base INTEGER",
            "CREATE INDEX IF NOT EXISTS records_base ON records (base) WHERE base IS NOT NULL",
        ),
    ),
    Migration(
        5,
        "the report's figures in columns (`report_columns`), a covering index in the "
        "report's GROUP BY order (no sort, no table row read), and an index of the records "
        "not filled yet (filled after, in batches: `report_backfill`)",
        (
            *(
                f"ALTER TABLE records ADD COLUMN {c} {'REAL' if c in MONEY else 'INTEGER'}"
                for c in REPORT_COLUMNS
            ),
            "CREATE INDEX IF NOT EXISTS records_report ON records "
            f"(rep_day, route, policy, model, time, kind, {', '.join(REPORT_COLUMNS[1:])}) "
            "WHERE rep_day IS NOT NULL AND kind != 'summarizer'",
            "CREATE INDEX IF NOT EXISTS records_unreported ON records (time) WHERE rep_day IS NULL",
        ),
    ),
)
SCHEMA_VERSION = latest(MIGRATIONS)


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


def migrate_file(location: str, _options: Mapping[str, Any]) -> list[int]:
    """`curator audit migrate` on a SQLite file: the versions it applied."""
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
