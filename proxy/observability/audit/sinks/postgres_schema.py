"""The PostgreSQL audit schema, its migrations, and opening a connection to it.

Same content-addressed layout as the SQLite store: `audit_messages` holds each distinct
redacted message once, by digest (`ON CONFLICT DO NOTHING`); `audit_records` references
them by their concatenated digests. Instead of SQLite's reference count, a message keeps
`last_used`, the newest record time that used it, raised at most once per
`LAST_USED_SLACK_S`: under MVCC every update rewrites the row, and counting references
rewrote a conversation's whole history on every turn (measured: 3x the storage of the
30-turn test, before vacuum). Retention deletes the records past the cutoff, then the
messages whose `last_used` is older than the cutoff by more than the slack.

`uid` (a digest of the whole record) is the key and makes a write idempotent: a batch
retried after a lost connection whose COMMIT did land inserts nothing twice. Few indexes:
each costs a fixed 16 KB or more, a tenth of a short conversation's whole footprint.
Migrations run under an advisory lock, so replicas starting together take turns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg

from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.audit.sinks.migrations import Migration, latest, pending
from proxy.observability.audit.sinks.report_columns import MONEY, REPORT_COLUMNS

LOCK_KEY = 0x6375726174  # "curat": this proxy's advisory lock, held while migrating
CONNECT_TIMEOUT_S = 5
TIMEOUT_S = 10.0
"""`audit.timeout_s`: a database slower than this fails the batch as unavailable (retried),
rather than holding the writer thread while the queue fills behind it. The server enforces
it (`statement_timeout`) and so does the client (`postgres_deadline`), for a server too
frozen to enforce anything."""

MIGRATIONS = (
    Migration(
        1,
        "content-addressed messages, records referencing them",
        (
            "CREATE TABLE audit_messages "
            "(hash bytea PRIMARY KEY, last_used float8 NOT NULL, body bytea NOT NULL)",
            "CREATE INDEX audit_messages_last_used ON audit_messages (last_used)",
            "CREATE TABLE audit_records (uid bytea PRIMARY KEY, "
            "time double precision NOT NULL, id text NOT NULL, kind text NOT NULL, "
            "parent_id text, route text, policy text, model text, status integer, "
            "original bytea NOT NULL, curated bytea, fields bytea NOT NULL)",
            "CREATE INDEX audit_records_time ON audit_records (time)",
            "CREATE INDEX audit_records_id ON audit_records (id text_pattern_ops)",
        ),
    ),
    Migration(
        2,
        "the report's figures in columns (`report_columns`): adding nullable columns "
        "rewrites no row, so the lock is brief; older records are filled after, in batches "
        "(`report_backfill`). No index: a parallel scan adding them up is ~1 s a million",
        (
            "ALTER TABLE audit_records "
            + ", ".join(
                f"ADD COLUMN {c} {'float8' if c in MONEY else 'bigint'}" for c in REPORT_COLUMNS
            ),
        ),
    ),
)
SCHEMA_VERSION = latest(MIGRATIONS)
LAST_USED_SLACK_S = 3600.0
"""How stale a message's `last_used` may be; retention keeps messages this much longer."""
_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def scrub(text: str) -> str:
    """An error text without the password a DSN in it may carry."""
    return _URL_PASSWORD.sub(r"\1***@", _PASSWORD.sub(r"\1***", text))


def unavailable(exc: psycopg.Error) -> bool:
    """Errors that mean the database cannot take writes now: down, connection lost, slow
    (statement timeout), disk full, a read-only replica."""
    return isinstance(
        exc,
        psycopg.OperationalError | psycopg.InterfaceError | psycopg.errors.ReadOnlySqlTransaction,
    )


def connect(dsn: str, *, read_only: bool = False, **options: Any) -> psycopg.Connection[Any]:
    """A connection with the timeouts above; raises StoreUnavailable if none can be had."""
    timeout = options.get("connect_timeout_s", CONNECT_TIMEOUT_S)
    settings = f"-c statement_timeout={int(options.get('timeout_s', TIMEOUT_S) * 1000)}"
    if read_only:
        settings += " -c default_transaction_read_only=on"
    try:
        return psycopg.connect(
            dsn,
            connect_timeout=max(1, int(timeout)),
            application_name="curator-audit",
            options=settings,
            autocommit=read_only,
        )
    except psycopg.Error as exc:
        raise StoreUnavailable(f"postgres: {scrub(str(exc)).strip()}") from None


def version(conn: psycopg.Connection[Any]) -> int:
    if conn.execute("SELECT to_regclass('audit_schema')").fetchone() == (None,):
        return 0
    row = conn.execute("SELECT max(version) FROM audit_schema").fetchone()
    return int(row[0] or 0) if row else 0


def migrate(conn: psycopg.Connection[Any], *, where: str) -> list[int]:
    """Apply pending migrations in one transaction under the advisory lock; the versions
    applied (none when the store is current or another replica just migrated it)."""
    with conn.transaction():
        if version(conn) == SCHEMA_VERSION:
            return []  # the common case: no lock, works on a read-only replica too
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS audit_schema (version integer NOT NULL)")
        steps = pending(version(conn), MIGRATIONS, where=where)
        for step in steps:
            for statement in step.statements:
                conn.execute(statement.encode())
            conn.execute("INSERT INTO audit_schema (version) VALUES (%s)", (step.version,))
    return [step.version for step in steps]


def dsn_of(location: str, options: Mapping[str, Any]) -> str:
    """`audit.dsn` if given, else `audit.path` (a postgresql:// URL)."""
    dsn = options.get("dsn") or location
    return str(dsn)
