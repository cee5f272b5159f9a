"""sinks/postgres_writer.py: what a batch sends (rows, messages once, in digest order), which
messages it need not send again, how errors are mapped, and retention's batches; mostly
against a fake connection, then the SQL itself on the session's throwaway cluster
(`tests/postgres.py`). Content addressing, crashes, restarts and concurrent writers end to
end: test_postgres.py."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks import postgres_writer as writer
from proxy.observability.audit.sinks.base import StoreUnavailable, stored_fields
from proxy.observability.audit.sinks.postgres_writer import PostgresSink, record_uid
from proxy.observability.audit.sinks.report_columns import report_values

T0 = 1_767_225_600.0
SLACK = schema.LAST_USED_SLACK_S
DSN = "postgresql://curator:hunter2@db.internal/audit"


def msg(text: str) -> StoredMessage:
    data = orjson.dumps({"role": "user", "content": text})
    return StoredMessage(hashlib.blake2b(data, digest_size=16).digest(), data)


def rec(
    rid: str,
    at: float,
    original: list[StoredMessage],
    curated: list[StoredMessage] | None = None,
    **fields: Any,
) -> AuditRecord:
    everything = {"id": rid, "time": at, "kind": "chat", **fields}
    return AuditRecord(at, everything, tuple(original), None if curated is None else tuple(curated))


# -- record_uid --------------------------------------------------------------------------
def test_the_uid_is_the_same_for_a_retry_and_differs_for_anything_else() -> None:
    a, b = msg("a"), msg("b")
    first = rec("r1", T0, [a, b])
    uid = record_uid(first, a.digest + b.digest, None)
    assert uid == record_uid(rec("r1", T0, [a, b]), a.digest + b.digest, None)
    assert len(uid) == 16
    others = {
        record_uid(rec("r2", T0, [a, b]), a.digest + b.digest, None),
        record_uid(rec("r1", T0 + 1, [a, b]), a.digest + b.digest, None),
        record_uid(first, b.digest + a.digest, None),
        record_uid(first, a.digest + b.digest, b""),  # curated to nothing is not "uncurated"
        record_uid(first, a.digest + b.digest, b.digest),
        record_uid(first, a.digest, b.digest),
    }
    assert uid not in others
    assert len(others) == 6


DIGESTS = st.lists(st.binary(min_size=16, max_size=16), max_size=3).map(b"".join)


@settings(max_examples=50)
@given(DIGESTS, st.none() | DIGESTS, DIGESTS, st.none() | DIGESTS)
def test_different_message_lists_never_share_a_uid(
    original: bytes, curated: bytes | None, other: bytes, other_curated: bytes | None
) -> None:
    record = rec("r", T0, [])
    same = (original, curated) == (other, other_curated)
    assert (
        record_uid(record, original, curated) == record_uid(record, other, other_curated)
    ) == same


# -- a fake connection -------------------------------------------------------------------
@dataclass
class FakeConn:
    """Records statements by transaction; `fail` raises on the next execute."""

    rowcounts: list[int] = field(default_factory=list)
    fail: Exception | None = None
    closed: bool = False
    committed: list[list[tuple[str, Any]]] = field(default_factory=list)
    _open: list[tuple[str, Any]] | None = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self._open = []
        try:
            yield
        finally:
            done, self._open = self._open, None
        self.committed.append(done)  # only when the block did not raise

    def execute(self, statement: str | bytes, params: Any = None) -> Any:
        if self.fail is not None:
            raise self.fail
        assert self._open is not None, "outside a transaction"
        text = statement.decode() if isinstance(statement, bytes) else statement
        self._open.append((text, params))
        if text.startswith("SELECT"):  # the report columns' backfill: nothing left to fill
            return SimpleNamespace(fetchall=list)
        return SimpleNamespace(rowcount=self.rowcounts.pop(0) if self.rowcounts else 0)

    def close(self) -> None:
        self.closed = True

    def statements(self) -> list[list[str]]:
        return [[text.split(" (")[0].split(" WHERE")[0] for text, _ in tx] for tx in self.committed]


@dataclass
class Database:
    """What `schema.connect` hands out, and what `schema.migrate` was asked."""

    conns: list[FakeConn] = field(default_factory=list)
    migrated: list[str] = field(default_factory=list)
    migrate_error: Exception | None = None
    next_conn: FakeConn | None = None

    def connect(self, dsn: str, **options: Any) -> FakeConn:
        assert dsn == DSN
        assert options == {"connect_timeout_s": 2.5, "timeout_s": schema.TIMEOUT_S}
        conn, self.next_conn = self.next_conn or FakeConn(), None
        self.conns.append(conn)
        return conn

    def migrate(self, _conn: FakeConn, *, where: str) -> list[int]:
        self.migrated.append(where)
        if self.migrate_error is not None:
            raise self.migrate_error
        return []


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch) -> Database:
    database = Database()
    monkeypatch.setattr(schema, "connect", database.connect)
    monkeypatch.setattr(schema, "migrate", database.migrate)
    return database


@pytest.fixture
def sink(db: Database) -> Iterator[PostgresSink]:  # noqa: ARG001 (`db` fakes its database)
    opened = PostgresSink(DSN, max_age_days=2, connect_timeout_s=2.5)
    yield opened
    opened.close()


INSERT_MESSAGES = "INSERT INTO audit_messages"
INSERT_RECORDS = "INSERT INTO audit_records"


def upserted(conn: FakeConn, tx: int = -1) -> tuple[list[bytes], list[float], list[bytes]]:
    """The (digests, last_used, bodies) a transaction's message upsert sent."""
    (params,) = [p for text, p in conn.committed[tx] if text.startswith(INSERT_MESSAGES)]
    digests, used, bodies = params
    return list(digests), list(used), list(bodies)


def inserted(conn: FakeConn, tx: int = -1) -> list[list[Any]]:
    (params,) = [p for text, p in conn.committed[tx] if text.startswith(INSERT_RECORDS)]
    return [list(column) for column in params]


def test_a_batch_is_one_transaction_sending_each_message_once_in_digest_order(
    sink: PostgresSink, db: Database
) -> None:
    shared, late, fresh, cut = msg("shared"), msg("late"), msg("fresh"), msg("cut")
    sink.write_many(
        [
            rec("r1", T0, [shared, late]),
            rec("r2", T0 + 5, [shared, fresh], [cut]),
            rec("r3", T0 + 2, [late, shared]),  # after r2, yet older
        ]
    )
    (conn,) = db.conns
    assert db.migrated == ["audit.dsn"]
    assert conn.statements() == [[INSERT_MESSAGES, INSERT_RECORDS]]  # one transaction
    digests, used, bodies = upserted(conn)
    expected = {shared: T0 + 5, late: T0 + 2, fresh: T0 + 5, cut: T0 + 5}  # newest use
    by_digest = sorted(expected, key=lambda m: m.digest)
    assert digests == [m.digest for m in by_digest]
    assert used == [expected[m] for m in by_digest]
    assert bodies == [m.data for m in by_digest]


def test_each_record_becomes_one_row_of_its_columns(sink: PostgresSink, db: Database) -> None:
    a, b = msg("a"), msg("b")
    plain = rec("r1", T0, [a, b], route="agents", policy="trim", model="gpt-4o", status=200)
    curated = rec("r2", T0 + 1, [a], [b], kind="summarizer", parent_id="r1", status=None)
    sink.write_many([plain, curated])
    rows = list(zip(*inserted(db.conns[0]), strict=True))
    assert rows[0] == (
        record_uid(plain, a.digest + b.digest, None),
        T0,
        "r1",
        "chat",
        None,
        "agents",
        "trim",
        "gpt-4o",
        200,
        a.digest + b.digest,
        None,
        stored_fields(plain),
        *report_values(T0, plain.fields),
    )
    assert rows[1][2:9] == ("r2", "summarizer", "r1", None, None, None, None)
    assert rows[1][9:11] == (a.digest, b.digest)


def test_messages_stored_recently_are_not_sent_again_until_the_slack_passes(
    sink: PostgresSink, db: Database
) -> None:
    old, new = msg("old"), msg("new")
    sink.write_many([rec("r1", T0, [old])])
    sink.write_many([rec("r2", T0 + SLACK - 1, [old, new])])
    sink.write_many([rec("r3", T0 + SLACK - 0.5, [old, new])])
    (conn,) = db.conns
    assert upserted(conn, 1)[0] == [new.digest]  # `old` is fresh: no need
    assert conn.statements()[2] == [INSERT_RECORDS]  # both still fresh
    sink.write_many([rec("r4", T0 + SLACK, [old])])
    assert upserted(conn, 3)[:2] == ([old.digest], [T0 + SLACK])  # last_used due a raise


def test_a_left_out_body_is_made_again_only_when_it_must_be_sent(
    sink: PostgresSink, db: Database
) -> None:
    """A by-reference record (`RecordBuilder`) leaves out the bodies of messages its cache
    knew; the sink asks for one only when the message is not known fresh in the store."""
    known, unknown = msg("known"), msg("unknown")
    made: list[bytes] = []

    def remake(digest: bytes) -> bytes:
        made.append(digest)
        return {known.digest: known.data, unknown.digest: unknown.data}[digest] or b""

    sink.write_many([rec("r1", T0, [known])])
    left_out = [known.without_body(), unknown.without_body()]
    sink.write_many([dataclasses.replace(rec("r2", T0 + 1, left_out), remake=remake)])
    assert made == [unknown.digest]  # `known` is fresh: its body is not needed
    assert upserted(db.conns[0]) == ([unknown.digest], [T0 + 1], [unknown.data])


def test_a_new_connection_forgets_what_the_last_one_stored(
    sink: PostgresSink, db: Database
) -> None:
    m = msg("m")
    sink.write_many([rec("r1", T0, [m])])
    db.conns[0].closed = True  # e.g. the server closed it
    sink.write_many([rec("r2", T0 + 1, [m])])
    assert len(db.conns) == 2
    assert upserted(db.conns[1])[0] == [m.digest]  # maybe another database: sent again


def test_only_the_newest_known_messages_are_remembered(
    sink: PostgresSink, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "KNOWN_MAX", 2)
    first, second, third = msg("1"), msg("2"), msg("3")
    for i, m in enumerate((first, second, third)):
        sink.write_many([rec(f"r{i}", T0 + i, [m])])
    sink.write_many([rec("again", T0 + 10, [first, second, third])])
    assert upserted(db.conns[0])[0] == [first.digest]


def test_a_message_sent_again_counts_as_the_newest_known(
    sink: PostgresSink, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "KNOWN_MAX", 2)
    first, second, third = msg("1"), msg("2"), msg("3")
    sink.write_many([rec("a", T0, [first])])
    sink.write_many([rec("b", T0 + SLACK, [second])])
    sink.write_many([rec("c", T0 + SLACK, [first])])  # due a raise: sent, and newest again
    sink.write_many([rec("d", T0 + SLACK, [third])])  # pushes out `second`
    sink.write_many([rec("e", T0 + SLACK + 1, [first, second, third])])
    assert upserted(db.conns[0])[0] == [second.digest]


def test_unavailable_drops_the_connection_and_hides_the_password(
    sink: PostgresSink, db: Database
) -> None:
    m = msg("m")
    sink.write_many([rec("r1", T0, [m])])
    conn = db.conns[0]
    conn.fail = psycopg.OperationalError(f"server closed the connection ({DSN})")
    with pytest.raises(StoreUnavailable) as caught:
        sink.write_many([rec("r2", T0 + 1, [m])])
    assert "hunter2" not in str(caught.value)
    assert str(caught.value).startswith("postgres: server closed the connection")
    assert caught.value.__cause__ is None
    assert conn.closed
    sink.write_many([rec("r2", T0 + 1, [m])])  # the retry reconnects
    assert len(db.conns) == 2
    assert upserted(db.conns[1])[0] == [m.digest]


def test_a_bad_batch_raises_as_it_is_and_keeps_the_connection(
    sink: PostgresSink, db: Database
) -> None:
    sink.prune(now=T0)  # connects
    conn = db.conns[0]
    conn.fail = psycopg.errors.NumericValueOutOfRange("integer out of range")
    m = msg("m")
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        sink.write_many([rec("r1", T0, [m], status=2**40)])
    assert not conn.closed
    conn.fail = None
    sink.write_many([rec("r1", T0, [m])])
    assert len(db.conns) == 1
    assert upserted(conn)[0] == [m.digest]  # not committed before: not known


def test_a_failed_migration_closes_its_connection(sink: PostgresSink, db: Database) -> None:
    db.migrate_error = psycopg.OperationalError("the database is starting up")
    with pytest.raises(StoreUnavailable, match="starting up"):
        sink.write_many([rec("r1", T0, [msg("m")])])
    assert db.conns[0].closed
    db.migrate_error = None
    sink.write_many([rec("r1", T0, [msg("m")])])
    assert len(db.conns) == 2


def test_prune_without_retention_only_connects(db: Database) -> None:
    forever = PostgresSink(DSN, connect_timeout_s=2.5)
    assert forever.prune(now=T0) == 0
    assert forever.prune(now=T0) == 0  # nothing was left to fill: not looked for again
    assert db.migrated == ["audit.dsn"]
    assert db.conns[0].statements() == [["SELECT uid, time, fields FROM audit_records"]]
    forever.close()
    assert db.conns[0].closed


def test_prune_deletes_in_short_transactions_until_a_batch_finds_nothing(
    sink: PostgresSink, db: Database
) -> None:
    db.next_conn = FakeConn(rowcounts=[500, 500, 7, 0, 3, 0])
    now = T0 + 10 * 86400
    assert sink.prune(now=now) == 1007
    conn = db.conns[0]
    assert [len(tx) for tx in conn.committed] == [1] * 7
    statements = [tx[0] for tx in conn.committed[1:]]  # after the backfill's look
    cutoff = now - 2 * 86400
    assert [p for _, p in statements] == [(cutoff, writer.PRUNE_BATCH)] * 4 + [
        (cutoff - SLACK, writer.PRUNE_BATCH)
    ] * 2
    assert [text.split(" WHERE")[0] for text, _ in statements] == (
        ["DELETE FROM audit_records"] * 4 + ["DELETE FROM audit_messages"] * 2
    )


# -- the SQL on a real server ------------------------------------------------------------
def last_used(dsn: str) -> dict[bytes, float]:
    with psycopg.connect(dsn) as conn:
        return {bytes(h): t for h, t in conn.execute("SELECT hash, last_used FROM audit_messages")}


def test_the_store_holds_each_column_the_record_gives(fresh_dsn: str) -> None:
    a, b = msg("a"), msg("b")
    record = rec("r1", T0, [a, b], [b], route="agents", policy="trim", model="m", status=502)
    sink = PostgresSink(fresh_dsn)
    sink.write_many([record])
    sink.close()
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute(
            "SELECT uid, time, id, kind, parent_id, route, policy, model, status, original, "
            "curated, fields FROM audit_records"
        ).fetchone()
    assert row is not None
    assert tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) == (
        record_uid(record, a.digest + b.digest, b.digest),
        T0,
        "r1",
        "chat",
        None,
        "agents",
        "trim",
        "m",
        502,
        a.digest + b.digest,
        b.digest,
        stored_fields(record),
    )


def test_last_used_is_raised_only_past_the_slack_and_never_lowered(fresh_dsn: str) -> None:
    m = msg("m")

    def write(rid: str, at: float) -> float:
        sink = PostgresSink(fresh_dsn)  # a new sink each time: nothing known, always sent
        sink.write_many([rec(rid, at, [m])])
        sink.close()
        return last_used(fresh_dsn)[m.digest]

    assert write("r1", T0) == T0
    assert write("r2", T0 + SLACK - 1) == T0  # within the slack: no row rewrite
    assert write("r3", T0 + SLACK + 1) == T0 + SLACK + 1
    assert write("r4", T0) == T0 + SLACK + 1  # a late, older record


def test_retention_keeps_messages_used_within_the_slack_before_the_cutoff(
    fresh_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "PRUNE_BATCH", 2)  # several batches
    now = T0 + 10 * 86400
    cutoff = now - 86400
    recent, stale = msg("recent"), msg("stale")
    sink = PostgresSink(fresh_dsn, max_age_days=1)
    sink.write_many([rec(f"s{i}", cutoff - SLACK - 10 - i, [stale]) for i in range(3)])
    sink.write_many([rec(f"r{i}", cutoff - SLACK / 2 - i, [recent]) for i in range(2)])
    sink.write_many([rec("kept", cutoff + 1, [])])
    assert sink.prune(now=now) == 5
    sink.close()
    with psycopg.connect(fresh_dsn) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM audit_records")]
    assert ids == ["kept"]
    assert set(last_used(fresh_dsn)) == {recent.digest}
