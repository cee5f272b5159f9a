"""Opening the SQLite store for writing: created private, in WAL mode, at the latest schema;
a failed transaction leaves nothing behind (migrations themselves: test_migrations.py)."""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest

from proxy.observability.audit.sinks.sqlite_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    connect_writer,
    transaction,
)


def test_a_new_store_is_private_in_wal_mode_and_at_the_latest_schema(tmp_path: Path) -> None:
    path = str(tmp_path / "audit.db")
    with closing(connect_writer(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"records", "messages", "records_time", "records_id", "records_route"} <= indexes
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_versions_are_consecutive_from_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


def test_a_store_from_a_newer_proxy_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "audit.db")
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(sqlite3.DatabaseError, match="newer than this proxy"):
        connect_writer(path)


def insert_then_fail(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.execute("INSERT INTO messages VALUES (x'00', 1, 'x')")
        raise RuntimeError("the writer failed mid-batch")


def test_a_failed_transaction_is_rolled_back(tmp_path: Path) -> None:
    with closing(connect_writer(str(tmp_path / "audit.db"))) as conn:
        with pytest.raises(RuntimeError):
            insert_then_fail(conn)
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
