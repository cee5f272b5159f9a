"""sinks/postgres_schema.py: scrubbing passwords from error texts, which errors mean
"unavailable", connecting with the store's timeouts, and migrating (one version at a time,
all or nothing). Concurrent migrations and a too-new store: test_postgres.py. Tests that
need a server share the session's throwaway cluster (`tests/postgres.py`) and skip
without one."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.audit.sinks.migrations import Migration
from tests.postgres import PgServer

NOWHERE = "127.0.0.1:9"  # nothing listens on port 9


# -- scrub -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'connection to "postgresql://curator:hunter2@db:5432/audit" failed',
            'connection to "postgresql://curator:***@db:5432/audit" failed',
        ),
        ("host=db password=hunter2 user=x", "host=db password=*** user=x"),
        ("host=db PASSWORD = hunter2", "host=db PASSWORD = ***"),
        ("host=db password='two words' user=x", "host=db password=*** user=x"),
        (r"host=db password='it\'s secret' user=x", "host=db password=*** user=x"),
        ("postgres://:hunter2@db/x", "postgres://:***@db/x"),
    ],
)
def test_scrub_masks_passwords_in_urls_and_key_value_dsns(text: str, expected: str) -> None:
    assert schema.scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://curator@db:5432/audit",  # a user and no password
        'relation "audit_records" does not exist',
        "see http://example.com/page:8080 for help",
    ],
)
def test_scrub_leaves_texts_without_a_password_alone(text: str) -> None:
    assert schema.scrub(text) == text


SECRET = st.text(
    st.characters(codec="ascii", categories=("L", "N", "P", "S"), exclude_characters="@/'\\"),
    min_size=1,
    max_size=20,
).map(lambda s: "Zq" + s)  # a prefix no other part of the text holds


@settings(max_examples=60)
@given(SECRET)
def test_scrub_never_leaves_a_url_or_key_value_password(secret: str) -> None:
    url = f"could not connect to postgresql://curator:{secret}@db.internal:5432/audit"
    assert secret not in schema.scrub(url)
    if " " not in secret:
        assert secret not in schema.scrub(f"host=db password={secret} dbname=audit")


# -- unavailable -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (psycopg.OperationalError("connection lost"), True),
        (psycopg.errors.QueryCanceled("statement timeout"), True),
        (psycopg.errors.DiskFull("no space"), True),
        (psycopg.InterfaceError("connection closed"), True),
        (psycopg.errors.ReadOnlySqlTransaction("read-only"), True),
        (psycopg.errors.UniqueViolation("duplicate"), False),
        (psycopg.errors.UndefinedTable("no table"), False),
        (psycopg.DataError("bad value"), False),
        (psycopg.InternalError("other internal error"), False),
    ],
)
def test_only_errors_that_mean_the_store_cannot_write_now_are_unavailable(
    exc: psycopg.Error, expected: bool
) -> None:
    assert schema.unavailable(exc) is expected


# -- dsn_of ------------------------------------------------------------------------------
def test_the_dsn_option_wins_over_the_path_and_an_empty_one_does_not() -> None:
    path = "postgresql://from-path/db"
    assert schema.dsn_of(path, {"dsn": "postgresql://from-dsn/db"}) == "postgresql://from-dsn/db"
    assert schema.dsn_of(path, {"dsn": ""}) == path
    assert schema.dsn_of(path, {"dsn": None}) == path
    assert schema.dsn_of(path, {}) == path


def test_versions_are_consecutive_from_one() -> None:
    assert [m.version for m in schema.MIGRATIONS] == list(range(1, schema.SCHEMA_VERSION + 1))


# -- connect -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 port=9 user=curator password='hunter 2' dbname=x",
        "postgresql://curator:hunter2@[::1/x",  # libpq quotes this whole DSN in its error
    ],
)
def test_no_connection_is_unavailable_and_shows_no_password(dsn: str) -> None:
    with pytest.raises(StoreUnavailable, match=r"^postgres: ") as caught:
        schema.connect(dsn, connect_timeout_s=0.1)
    assert "hunter" not in str(caught.value)
    assert caught.value.__cause__ is None  # `from None`: psycopg's text may hold the DSN
    assert caught.value.__suppress_context__


@pytest.fixture(scope="module")
def untouched_dsn(pg_server: PgServer) -> str:
    """One database for the tests that only connect: none of them writes to it."""
    return pg_server.create_database()


def setting(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(f"SHOW {name}".encode()).fetchone()
    assert row is not None
    return str(row[0])


def test_a_writer_connection_has_the_timeout_and_its_transactions(untouched_dsn: str) -> None:
    with schema.connect(untouched_dsn, connect_timeout_s=0.2) as conn:
        assert setting(conn, "statement_timeout") == f"{int(schema.TIMEOUT_S)}s"
        assert setting(conn, "application_name") == "curator-audit"
        assert setting(conn, "default_transaction_read_only") == "off"
        assert conn.autocommit is False
        assert conn.info.get_parameters()["connect_timeout"] == "1"  # at least a second


def test_a_read_only_connection_cannot_write(untouched_dsn: str) -> None:
    with schema.connect(untouched_dsn, read_only=True) as conn:
        assert conn.autocommit is True
        assert setting(conn, "default_transaction_read_only") == "on"
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("CREATE TABLE t (x int)")
    assert schema.unavailable(caught.value)


# -- version and migrate -----------------------------------------------------------------
def tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
        "UNION SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"
    ).fetchall()
    return {row[0] for row in rows}


def test_migrate_creates_the_schema_once_and_reports_what_it_applied(fresh_dsn: str) -> None:
    with schema.connect(fresh_dsn) as conn:
        assert schema.version(conn) == 0
        assert schema.migrate(conn, where="test") == [1, 2]
        assert schema.version(conn) == schema.SCHEMA_VERSION
        assert {
            "audit_schema",
            "audit_messages",
            "audit_records",
            "audit_messages_last_used",
            "audit_records_time",
            "audit_records_id",
        } <= tables(conn)
        assert schema.migrate(conn, where="test") == []
        rows = conn.execute("SELECT version FROM audit_schema").fetchall()
    assert rows == [(1,), (2,)]


def test_an_empty_version_table_is_version_zero(fresh_dsn: str) -> None:
    with schema.connect(fresh_dsn) as conn:
        conn.execute("CREATE TABLE audit_schema (version integer NOT NULL)")
        assert schema.version(conn) == 0


def test_a_current_store_migrates_on_a_read_only_connection(fresh_dsn: str) -> None:
    with schema.connect(fresh_dsn) as conn:
        schema.migrate(conn, where="test")
    with schema.connect(fresh_dsn, read_only=True) as conn:
        assert schema.migrate(conn, where="test") == []


def with_step(monkeypatch: pytest.MonkeyPatch, *statements: str) -> None:
    """A release with one more migration than this one."""
    step = Migration(schema.SCHEMA_VERSION + 1, "test step", statements)
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, step))
    monkeypatch.setattr(schema, "SCHEMA_VERSION", step.version)


def test_only_the_pending_migrations_run(fresh_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with schema.connect(fresh_dsn) as conn:
        schema.migrate(conn, where="test")
        with_step(monkeypatch, "ALTER TABLE audit_records ADD COLUMN note text")
        assert schema.migrate(conn, where="test") == [3]
        assert schema.version(conn) == 3
        conn.execute("SELECT note FROM audit_records")  # the column exists


def test_a_failing_migration_leaves_the_store_as_it_was(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_step(monkeypatch, "CREATE TABLE half_done (x int)", "THIS IS NOT SQL")
    with schema.connect(fresh_dsn) as conn:
        with pytest.raises(psycopg.errors.SyntaxError):
            schema.migrate(conn, where="test")
        assert schema.version(conn) == 0
        assert tables(conn) == set()  # version 1 and the half-done step both rolled back
