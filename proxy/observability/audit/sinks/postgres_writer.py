"""PostgreSQL audit sink: the content-addressed store shared by every replica.

One transaction per batch, two statements whatever its size (arrays through `unnest`):
the messages, each distinct one inserted once (its `last_used` raised now and then),
then the records, skipping any already stored (`uid`). Messages are
upserted in digest order, so concurrent writers lock rows in the same order and never
deadlock. Any error that means the database cannot take writes (down, restarted,
connection lost, slow, disk full, read-only, frozen past `timeout_s`: the client-side
`postgres_deadline`) drops the connection and raises `StoreUnavailable`: the writer keeps
the batch and retries with backoff, and the retry cannot duplicate a record whose first
COMMIT landed.

Schema and migrations: `sinks.postgres_schema`. Reading back: `readers.postgres`.
Registered by `sinks.postgres` (which loads this module, and psycopg, only when used).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import psycopg

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks.base import Bodies, StoreUnavailable, blobs_of, stored_fields
from proxy.observability.audit.sinks.postgres_deadline import Deadline
from proxy.observability.audit.sinks.report_backfill import backfill_postgres
from proxy.observability.audit.sinks.report_columns import MONEY, REPORT_COLUMNS, report_values

PRUNE_BATCH = 500
FILL_PER_PRUNE = 20_000
"""Older records whose report columns a retention pass fills (`report_backfill`)."""
KNOWN_MAX = 50_000
"""Digests remembered per sink (~5 MB): more than a busy replica's hour of distinct ones."""
_COLUMNS = ("id", "kind", "parent_id", "route", "policy", "model", "status")
_INSERT_RECORDS = (
    "INSERT INTO audit_records (uid, time, id, kind, parent_id, route, policy, model, "
    f"status, original, curated, fields, {', '.join(REPORT_COLUMNS)}) SELECT * FROM "
    "unnest(%b::bytea[], %b::float8[], %b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::text[], %b::text[], %b::int[], %b::bytea[], %b::bytea[], %b::bytea[], "
    + ", ".join(f"%b::{'float8' if c in MONEY else 'bigint'}[]" for c in REPORT_COLUMNS)
    + ") ON CONFLICT (uid) DO NOTHING"
)
_UPSERT_MESSAGES = (
    "INSERT INTO audit_messages (hash, last_used, body) "
    "SELECT * FROM unnest(%b::bytea[], %b::float8[], %b::bytea[]) AS m (hash, last_used, body) "
    "ORDER BY hash ON CONFLICT (hash) DO UPDATE SET last_used = excluded.last_used "
    f"WHERE audit_messages.last_used < excluded.last_used - {schema.LAST_USED_SLACK_S}"
)
_DELETE_OLDEST = (
    "DELETE FROM audit_records WHERE uid IN (SELECT uid FROM audit_records WHERE time < %s "
    "ORDER BY time LIMIT %s FOR UPDATE SKIP LOCKED)"
)
_DELETE_UNUSED = (
    "DELETE FROM audit_messages WHERE hash IN (SELECT hash FROM audit_messages "
    "WHERE last_used < %s LIMIT %s FOR UPDATE SKIP LOCKED)"
)


def record_uid(record: AuditRecord, original: bytes, curated: bytes | None) -> bytes:
    """The record's identity: a digest of everything it holds (fields include its id,
    time and latency), so only a retry of the same record shares it."""
    h = hashlib.blake2b(orjson.dumps(record.fields), digest_size=16)
    h.update(original)
    h.update(b"\0" if curated is None else b"\1" + curated)
    return h.digest()


class PostgresSink:
    """Writes records to PostgreSQL and applies retention. Used by one thread only."""

    def __init__(
        self,
        dsn: str,
        *,
        max_age_days: float | None = None,
        connect_timeout_s: float = 5,
        timeout_s: float = schema.TIMEOUT_S,
    ) -> None:
        self._dsn = dsn
        self.max_age_days = max_age_days
        self._connect_timeout_s = connect_timeout_s
        self._deadline = Deadline(timeout_s)
        self._conn: psycopg.Connection[Any] | None = None
        self._fill_from: bytes | None = b""
        """Where the next retention pass goes on filling older records' report columns;
        None once it reached the end (what this sink writes is filled as it is written)."""
        self._known: OrderedDict[bytes, float] = OrderedDict()
        """Messages this sink stored, with the `last_used` it gave them: within the slack
        they need not be sent again, so a conversation's resent history costs nothing.
        Retention cannot have removed them (it keeps messages used within a day plus the
        slack); a new connection forgets them all, in case the database is not the same."""

    def _connection(self) -> psycopg.Connection[Any]:
        # Connected (and migrated) lazily in the writer thread; reconnected after a loss.
        if self._conn is None or self._conn.closed:
            timeouts = (self._connect_timeout_s, self._deadline.seconds)
            conn = schema.connect(self._dsn, connect_timeout_s=timeouts[0], timeout_s=timeouts[1])
            try:
                with self._deadline.bound(conn):
                    schema.migrate(conn, where="audit.dsn")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
            self._known.clear()
            self._fill_from = b""  # maybe another database now: look for unfilled records
        return self._conn

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        """All of `records` in one transaction; those already stored are skipped."""
        columns: list[list[Any]] = [[] for _ in range(12 + len(REPORT_COLUMNS))]
        bodies = Bodies()
        used: dict[bytes, float] = {}
        for record in records:
            messages = blobs_of(record)
            bodies.add(record, messages)
            for message in messages:
                used[message.digest] = max(record.time, used.get(message.digest, record.time))
            original = b"".join(m.digest for m in record.original)
            curated = None if record.curated is None else b"".join(m.digest for m in record.curated)
            row = (
                record_uid(record, original, curated),
                record.time,
                *(record.fields.get(c) for c in _COLUMNS),
                original,
                curated,
                stored_fields(record),
                *report_values(record.time, record.fields),
            )
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        with self._mapped():
            conn = self._connection()
            digests = sorted(d for d in used if not self._fresh(d, used[d]))
            upsert = (digests, [used[d] for d in digests], [bodies[d] for d in digests])
            with self._deadline.bound(conn), conn.transaction():
                if digests:
                    conn.execute(_UPSERT_MESSAGES, upsert)
                conn.execute(_INSERT_RECORDS, columns)
        for digest in digests:  # committed: now they are known
            self._known[digest] = used[digest]
            self._known.move_to_end(digest)
        while len(self._known) > KNOWN_MAX:
            self._known.popitem(last=False)

    def _fresh(self, digest: bytes, when: float) -> bool:
        stored = self._known.get(digest)
        return stored is not None and when - stored < schema.LAST_USED_SLACK_S

    def prune(self, now: float | None = None) -> int:
        """Drop records older than `max_age_days`, a batch per transaction, then messages
        no record used since (see `postgres_schema`); first, fill some older records' report
        columns (`report_backfill`). Connects (and migrates) even without
        retention: the writer calls this at start, so a database down shows at once."""
        with self._mapped():
            conn = self._connection()
            if self._fill_from is not None:
                with self._deadline.bound(conn):
                    _, self._fill_from = backfill_postgres(conn, FILL_PER_PRUNE, self._fill_from)
            if self.max_age_days is None:
                return 0
            cutoff = (time.time() if now is None else now) - self.max_age_days * 86400
            deleted = 0
            with self._deadline.bound(conn):
                while count := _delete_batch(conn, _DELETE_OLDEST, cutoff):
                    deleted += count
            with self._deadline.bound(conn):
                while _delete_batch(conn, _DELETE_UNUSED, cutoff - schema.LAST_USED_SLACK_S):
                    pass
            return deleted

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _mapped(self) -> Iterator[None]:
        """Unavailability -> StoreUnavailable, the connection dropped so the next try
        reconnects; other errors (a bad batch) pass as they are."""
        try:
            yield
        except psycopg.Error as exc:
            if self._deadline.expired:
                self.close()
                seconds = self._deadline.seconds
                raise StoreUnavailable(f"postgres: no answer within {seconds:g} s") from None
            if not schema.unavailable(exc):
                raise
            self.close()
            raise StoreUnavailable(f"postgres: {schema.scrub(str(exc)).strip()}") from None


def _delete_batch(conn: psycopg.Connection[Any], statement: str, before: float) -> int:
    """One short transaction of at most PRUNE_BATCH rows, so writers barely wait; SKIP
    LOCKED lets replicas prune side by side."""
    with conn.transaction():
        return conn.execute(statement.encode(), (before, PRUNE_BATCH)).rowcount
