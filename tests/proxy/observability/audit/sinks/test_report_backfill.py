"""The report columns: the sinks fill them from the fields they store, a store older than
them reports the same before, during and after the migration that fills them, on SQLite
and PostgreSQL (the report compared with `report.Row.add`'s, record for record)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.cli.main import main
from proxy.cli.report import Row, client_records, grouped, sorted_rows
from proxy.observability.audit.readers.aggregate_columns import GROUPS
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks import postgres_schema, sqlite_schema
from proxy.observability.audit.sinks.base import stored_fields
from proxy.observability.audit.sinks.postgres_writer import PostgresSink, record_uid
from proxy.observability.audit.sinks.report_backfill import (
    NEXT_UNFILLED,
    backfill_postgres,
    backfill_sqlite,
    stored_values,
)
from proxy.observability.audit.sinks.report_columns import REPORT_COLUMNS, report_values
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.proxy.observability.audit.readers.test_aggregate import records

_COLUMNS = ", ".join(REPORT_COLUMNS)
_NAMED = ("id", "kind", "route", "policy", "model")


def expected() -> list[dict[str, Any]]:
    return [r.as_dict() for r in grouped(client_records((r.as_dict() for r in records()), None))]


def reported(reader: Any) -> list[dict[str, Any]]:
    try:
        return [r.as_dict() for r in sorted_rows(Row(*g) for g in reader.grouped(0.0, None))]
    finally:
        reader.close()


def sqlite_v4(path: Path) -> str:
    """A store as schema 4 made it, holding the records (no report columns)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for step in sqlite_schema.MIGRATIONS[:4]:
            for statement in step.statements:
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 4")
        for record in records():
            conn.execute(
                "INSERT INTO records (time, id, kind, route, policy, model, original, fields) "
                "VALUES (?, ?, ?, ?, ?, ?, x'', ?)",
                (record.time, *(record.fields.get(k) for k in _NAMED), stored_fields(record)),
            )
    return str(path)


def test_an_old_sqlite_store_reports_the_same_before_during_and_after(tmp_path: Path) -> None:
    db = sqlite_v4(tmp_path / "audit.db")
    wanted = expected()
    assert reported(SqliteReader(db)) == wanted  # schema 4: from the JSON
    with closing(sqlite_schema.connect_writer(db)) as conn:  # columns added, none filled
        assert reported(SqliteReader(db)) == wanted
        assert backfill_sqlite(conn, 5) == 5  # some filled, some not: both halves add up
        assert reported(SqliteReader(db)) == wanted
    assert main(["audit", "migrate", "--path", db]) == 0  # fills the rest
    with closing(sqlite3.connect(db)) as conn:
        left = conn.execute("SELECT count(*) FROM records WHERE rep_day IS NULL").fetchone()
    assert left == (0,)
    assert reported(SqliteReader(db)) == wanted


def test_the_sqlite_sink_writes_the_columns_of_the_fields_it_stores(tmp_path: Path) -> None:
    db = str(tmp_path / "audit.db")
    sink = SqliteSink(db)
    sink.write_many(records())
    sink.close()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(f"SELECT time, fields, {_COLUMNS} FROM records ORDER BY seq").fetchall()
        plan = conn.execute(f"EXPLAIN QUERY PLAN {GROUPS}", (0, 1, 0, 1, 0, 1)).fetchall()
    assert [row[2:] for row in rows] == [stored_values(row[0], row[1]) for row in rows]
    assert all(row[2] is not None for row in rows)
    assert "COVERING INDEX records_report" in str(plan)  # no sort, no table row read
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("UPDATE records SET rep_day = NULL WHERE seq = 1")
        plan = conn.execute(f"EXPLAIN QUERY PLAN {NEXT_UNFILLED}", (0, 0, 1)).fetchall()
        assert backfill_sqlite(conn) == 1  # found through the index of unfilled records
    assert "records_unreported" in str(plan)


def test_a_value_no_column_holds_leaves_the_record_to_its_json() -> None:
    huge = {"tokens_before": 2**63, "cost": {"actual_usd": float("nan")}}
    assert report_values(0.0, huge) == (None,) * len(REPORT_COLUMNS)
    assert report_values(0.0, {"cost": {"actual_usd": float("inf")}})[7] == 0.0  # JSON null


def postgres_v1(dsn: str) -> None:
    """A database as schema 1 made it, holding the records (no report columns)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE audit_schema (version integer NOT NULL)")
        conn.execute("INSERT INTO audit_schema VALUES (1)")
        for statement in postgres_schema.MIGRATIONS[0].statements:
            conn.execute(statement.encode())
        for n, record in enumerate(records()):
            conn.execute(
                "INSERT INTO audit_records (uid, time, id, kind, route, policy, model, "
                "original, fields) VALUES (%s, %s, %s, %s, %s, %s, %s, '', %s)",
                (
                    record_uid(record, bytes([n]), None),
                    record.time,
                    *(record.fields.get(k) for k in _NAMED),
                    stored_fields(record),
                ),
            )


def test_an_old_postgres_store_reports_the_same_before_during_and_after(fresh_dsn: str) -> None:
    postgres_v1(fresh_dsn)
    wanted = expected()
    assert reported(PostgresReader(fresh_dsn)) == wanted
    with postgres_schema.connect(fresh_dsn) as conn:
        assert postgres_schema.migrate(conn, where="test") == [2]
        assert reported(PostgresReader(fresh_dsn)) == wanted
        assert backfill_postgres(conn, 5)[0] == 5
        assert reported(PostgresReader(fresh_dsn)) == wanted
    assert main(["audit", "migrate", "--path", fresh_dsn]) == 0
    with psycopg.connect(fresh_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM audit_records WHERE rep_day IS NULL").fetchone()
    assert left == (0,)
    assert reported(PostgresReader(fresh_dsn)) == wanted


def test_the_postgres_sink_writes_the_columns_of_the_fields_it_stores(fresh_dsn: str) -> None:
    sink = PostgresSink(fresh_dsn)
    sink.write_many(records())
    sink.close()
    with psycopg.connect(fresh_dsn) as conn:
        rows = conn.execute(f"SELECT time, fields, {_COLUMNS} FROM audit_records").fetchall()
    assert len(rows) == len(records())
    assert [row[2:] for row in rows] == [stored_values(row[0], row[1]) for row in rows]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_retention_passes_fill_older_records(
    store: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer fills a bounded number of older records per pass, not all at once."""
    if store == "sqlite":
        module = "proxy.observability.audit.sinks.sqlite"
        location = sqlite_v4(tmp_path / "audit.db")
        sink: Any = SqliteSink(location)
        count = "SELECT count(*) FROM records WHERE rep_day IS NULL"
    else:
        module = "proxy.observability.audit.sinks.postgres_writer"
        location = request.getfixturevalue("fresh_dsn")
        postgres_v1(location)
        sink = PostgresSink(location)
        count = "SELECT count(*) FROM audit_records WHERE rep_day IS NULL"
    monkeypatch.setattr(f"{module}.FILL_PER_PRUNE", 4)
    left = []
    for _ in range(4):
        sink.prune()
        left.append(_count(store, location, count))
    sink.close()
    assert left == [8, 4, 0, 0]


def _count(store: str, location: str, statement: str) -> int:
    if store == "sqlite":
        with closing(sqlite3.connect(location)) as conn:
            return int(conn.execute(statement).fetchone()[0])
    with psycopg.connect(location) as pg:
        row = pg.execute(statement).fetchone()
    return int(row[0]) if row else -1
