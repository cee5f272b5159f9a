"""Schema migrations: a SQLite store made by the previous release upgrades in place, once,
with workers starting together; `curator audit migrate` does it on demand."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from proxy.cli.main import main
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks.migrations import Migration, SchemaTooNew, pending
from proxy.observability.audit.sinks.sqlite import SCHEMA_VERSION, SqliteSink, connect_writer
from tests.proxy.observability.audit.sinks.test_sqlite_refs import rows_left

V1 = (
    # The store as the release before migrations made it (user_version 1).
    "PRAGMA auto_vacuum = INCREMENTAL",
    "PRAGMA journal_mode = WAL",
    "CREATE TABLE messages (hash BLOB PRIMARY KEY, refs INTEGER NOT NULL, body BLOB NOT NULL)",
    "CREATE TABLE records (seq INTEGER PRIMARY KEY, time REAL NOT NULL, id TEXT NOT NULL, "
    "kind TEXT NOT NULL, parent_id TEXT, route TEXT, policy TEXT, model TEXT, status INTEGER, "
    "original BLOB NOT NULL, curated BLOB, fields BLOB NOT NULL)",
    "CREATE INDEX records_time ON records (time)",
    "CREATE INDEX records_id ON records (id)",
    "INSERT INTO messages VALUES (x'00112233445566778899aabbccddeeff', 1, "
    '\'{"role":"user","content":"hi"}\')',
    "INSERT INTO records VALUES (1, 1.0, 'old-1', 'chat', NULL, 'r', 'p', 'm', 200, "
    'x\'00112233445566778899aabbccddeeff\', NULL, CAST(\'{"id":"old-1","route":"r"}\' AS BLOB))',
    "PRAGMA user_version = 1",
)


def old_store(path: Path) -> str:
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for statement in V1:
            conn.execute(statement)
    return str(path)


def indexes(path: str) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    return {row[0] for row in rows if not row[0].startswith("sqlite_")}


def version(path: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_an_old_store_upgrades_in_place_and_keeps_its_records(tmp_path: Path) -> None:
    db = old_store(tmp_path / "audit.db")
    assert SCHEMA_VERSION == 5
    sink = SqliteSink(db)
    sink.close()
    connect_writer(db).close()
    assert version(db) == 5
    assert {"records_route", "records_base"} <= indexes(db)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT refs FROM message_refs").fetchall() == [(1,)]
    reader = SqliteReader(db)
    try:
        record = reader.get("old-1")
    finally:
        reader.close()
    assert record is not None
    assert record["original"] == [{"role": "user", "content": "hi"}]
    # The counts moved with the messages: retention still frees the old record's message.
    sink = SqliteSink(db, max_age_days=1)
    assert sink.prune() == 1
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        assert rows_left(conn) == [0, 0, 0]


def test_workers_starting_together_migrate_once(tmp_path: Path) -> None:
    db = old_store(tmp_path / "audit.db")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            connect_writer(db).close()
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert version(db) == 5


def test_a_newer_store_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "audit.db")
    connect_writer(db).close()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(sqlite3.DatabaseError, match="newer than this proxy"):
        connect_writer(db)
    with pytest.raises(SchemaTooNew, match="x: audit schema 3"):
        pending(3, (Migration(1, "a", ()), Migration(2, "b", ())), where="x")


def test_curator_audit_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = old_store(tmp_path / "audit.db")
    assert main(["audit", "migrate", "--path", db]) == 0
    assert capsys.readouterr().out == f"{db}: applied schema versions 2, 3, 4, 5\n"
    assert main(["audit", "migrate", "--path", db]) == 0
    assert capsys.readouterr().out == f"{db}: schema up to date\n"
    jsonl = tmp_path / "audit.jsonl"
    jsonl.write_text("")
    assert main(["audit", "migrate", "--path", str(jsonl)]) == 1
    assert "no schema to migrate" in capsys.readouterr().err


def test_curator_audit_migrate_postgres(fresh_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "migrate", "--path", fresh_dsn]) == 0
    assert capsys.readouterr().out.endswith(": applied schema versions 1, 2\n")
    assert main(["audit", "migrate", "--path", fresh_dsn]) == 0
    assert capsys.readouterr().out.endswith(": schema up to date\n")
