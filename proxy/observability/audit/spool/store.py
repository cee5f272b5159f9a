"""`Spool`: the local file that holds audit records while a remote store cannot take them.

SQLite in WAL mode, `synchronous = FULL`: an appended batch is one transaction, fsync'd once
at its COMMIT, so a record the spool took survives a crash of the process (`kill -9`) or of
the machine. Records keep their order (`seq`) and are taken out only once the store has
committed them (`consume`), so a crash between the two replays a batch the store already
has: the store's idempotent insert (PostgreSQL: `ON CONFLICT (uid) DO NOTHING`) keeps it
once. Each distinct message body is kept once (`messages`), as in the store, since an
agent resends its whole history every turn; bodies go when the spool is empty.

Bounds: `max_bytes` of database pages in use (a batch that finds the spool at or past it is
dropped whole, so the file ends at most one batch over), and `max_age_s` (`expire` drops
the records spooled longer ago). Several processes (`--workers N`) share one file: appends
queue on SQLite's write lock, and one of them drains at a time (`proxy.observability.
audit.spool.sink`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.sinks.base import blobs_of, split_digests

BUSY_TIMEOUT_S = 10.0
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "spooled REAL NOT NULL, time REAL NOT NULL, fields BLOB NOT NULL, original BLOB NOT NULL, "
    "curated BLOB, tools BLOB)",
    "CREATE TABLE IF NOT EXISTS messages (digest BLOB PRIMARY KEY, body BLOB NOT NULL) "
    "WITHOUT ROWID",
)
_PARAMS = 500
"""Digests looked up per statement (SQLite's limit on parameters is far higher)."""


@dataclass(frozen=True, slots=True)
class SpoolState:
    """What the spool holds now: records, bytes of pages in use, the oldest's spool time."""

    records: int
    bytes: int
    oldest: float | None

    def age_s(self, now: float) -> float:
        return 0.0 if self.oldest is None else max(0.0, now - self.oldest)


class Spool:
    """One spool file; thread-safe (one connection, behind a lock)."""

    def __init__(self, path: str, *, max_bytes: int, max_age_s: float) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        with self._transaction():
            for statement in _SCHEMA:
                self._conn.execute(statement)

    def append(self, records: Sequence[AuditRecord]) -> bool:
        """Add `records` after those held, in one durable transaction; False (nothing added)
        when the spool is at `max_bytes`."""
        now = time.time()
        with self._lock, self._transaction():
            if self._used_bytes() >= self.max_bytes:
                return False
            for record in records:
                self._add_bodies(record)
                self._conn.execute(
                    "INSERT INTO records (spooled, time, fields, original, curated, tools) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (now, record.time, orjson.dumps(record.fields), *_digests(record)),
                )
        return True

    def is_empty(self) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None

    def peek(self, limit: int) -> list[tuple[int, AuditRecord]]:
        """The oldest `limit` records, with their sequence numbers, bodies included."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT seq, time, fields, original, curated, tools FROM records "
                "ORDER BY seq LIMIT ?",
                (limit,),
            ).fetchall()
            wanted = {d for row in rows for blob in row[3:] for d in split_digests(blob)}
            bodies = self._bodies(sorted(wanted))
        return [(row[0], _record(row, bodies)) for row in rows]

    def consume(self, last_seq: int) -> None:
        """Take out every record up to `last_seq` (the store committed them); the bodies go
        once no record is left."""
        with self._lock, self._transaction():
            self._conn.execute("DELETE FROM records WHERE seq <= ?", (last_seq,))
            self._conn.execute(
                "DELETE FROM messages WHERE NOT EXISTS (SELECT 1 FROM records LIMIT 1)"
            )

    def expire(self, now: float | None = None) -> int:
        """Drop the records spooled more than `max_age_s` ago; how many went."""
        cutoff = (time.time() if now is None else now) - self.max_age_s
        with self._lock, self._transaction():
            gone = self._conn.execute("DELETE FROM records WHERE spooled < ?", (cutoff,)).rowcount
            if gone:
                self._conn.execute(
                    "DELETE FROM messages WHERE NOT EXISTS (SELECT 1 FROM records LIMIT 1)"
                )
        return int(gone)

    def state(self) -> SpoolState:
        with self._lock:
            count, oldest = self._conn.execute(
                "SELECT count(*), min(spooled) FROM records"
            ).fetchone()
            return SpoolState(int(count), self._used_bytes(), oldest)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _used_bytes(self) -> int:
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = self._conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def _add_bodies(self, record: AuditRecord) -> None:
        """Each of the record's messages the spool lacks, its body made again if the
        record left it out (a store by reference: `AuditRecord.body`)."""
        blobs = {m.digest: m for m in blobs_of(record)}
        have = self._bodies(sorted(blobs), bodies=False)
        self._conn.executemany(
            "INSERT INTO messages (digest, body) VALUES (?, ?)",
            [(d, record.body(m)) for d, m in blobs.items() if d not in have],
        )

    def _bodies(self, digests: list[bytes], *, bodies: bool = True) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        column = "body" if bodies else "x''"
        for start in range(0, len(digests), _PARAMS):
            chunk = digests[start : start + _PARAMS]
            marks = ",".join("?" * len(chunk))
            found.update(
                self._conn.execute(
                    f"SELECT digest, {column} FROM messages WHERE digest IN ({marks})", chunk
                ).fetchall()
            )
        return found

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE (the write lock first: processes queue instead of deadlocking),
        then COMMIT, or ROLLBACK on an error."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")


def _digests(record: AuditRecord) -> tuple[bytes, bytes | None, bytes | None]:
    original = b"".join(m.digest for m in record.original)
    curated = None if record.curated is None else b"".join(m.digest for m in record.curated)
    return original, curated, None if record.tools is None else record.tools.digest


def _record(row: Any, bodies: dict[bytes, bytes]) -> AuditRecord:
    _, when, fields, original, curated, tools = row

    def messages(blob: bytes) -> tuple[StoredMessage, ...]:
        return tuple(StoredMessage(d, bodies[d]) for d in split_digests(blob))

    return AuditRecord(
        time=float(when),
        fields=orjson.loads(fields),
        original=messages(original),
        curated=None if curated is None else messages(curated),
        tools=None if tools is None else messages(tools)[0],
    )
